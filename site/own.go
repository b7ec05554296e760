package site

import "context"

// ownLifetime is a goroutine with a context of its own, for a component
// that must outlive its owner's context (an AMI client logs off last).
type ownLifetime struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// goOwn starts run on a goroutine with a fresh context.
func goOwn(run func(ctx context.Context)) *ownLifetime {
	ctx, cancel := context.WithCancel(context.Background())
	l := &ownLifetime{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		run(ctx)
	}()
	return l
}

// stop cancels the goroutine's context and waits for it to return.
func (l *ownLifetime) stop() {
	l.cancel()
	<-l.done
}
