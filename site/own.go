package site

import "context"

// Lifetime is a goroutine with a context of its own, for a component
// that must outlive its owner's context (an AMI client logs off last;
// the bridge's hub and recorders stop after its sites).
type Lifetime struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// GoOwn starts run on a goroutine with a fresh context.
func GoOwn(run func(ctx context.Context)) *Lifetime {
	ctx, cancel := context.WithCancel(context.Background())
	l := &Lifetime{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		run(ctx)
	}()
	return l
}

// Stop cancels the goroutine's context and waits for it to return.
func (l *Lifetime) Stop() {
	l.cancel()
	<-l.done
}
