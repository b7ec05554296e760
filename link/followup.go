package link

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/calls"
)

// Follow-ups (docs/link.md): the actions the engine asks for besides the
// fixed resync lists (calls.Engine.Followups). After a resync's lists are
// applied the link sends the engine's FollowResync actions and applies
// their answers (and any second round they lead to) before EndResync, so
// the first live snapshot has them; then, while live, it sends what events
// asked for (FollowPending), the periodic FollowRefresh, and the actions
// other packages request with Refresh. Everything the engine touches stays
// on Run's goroutine: actions are sent from background goroutines and
// their answers come back through a channel.

const (
	// DefaultRefreshEvery is Config.RefreshEvery's default.
	DefaultRefreshEvery = 30 * time.Second
	// fuParallel bounds the follow-up actions in flight at once.
	fuParallel = 16
	// fuRounds bounds the follow-up rounds of one resync (a round's
	// answers may ask for more: a PBX without DBGetTree is read with
	// DBGet, a detailed endpoint's mailbox is counted).
	fuRounds = 4
	// maxRequested bounds the actions Refresh may queue.
	maxRequested = 1024
)

// fuAnswer is one follow-up action and what the PBX answered.
type fuAnswer struct {
	action ami.Message
	resp   ami.Response
	err    error
}

// fuBatch is a batch of answered follow-ups.
type fuBatch struct {
	id      uint64
	gen     uint64
	answers []fuAnswer
}

// followups is Run's bookkeeping of follow-ups; only Run's goroutine uses
// it.
type followups struct {
	done   chan fuBatch
	tick   <-chan time.Time
	ticker *time.Ticker
	nextID uint64
	bg     uint64 // id of the background batch in flight, 0 if none
	resync *resyncWait
	extra  []ami.Message // requested through Refresh, not yet sent
}

// resyncWait is a resync waiting for its follow-ups.
type resyncWait struct {
	id     uint64 // of the batch in flight
	rounds int
	start  time.Time
	lists  time.Duration // what the list actions took
	items  int
}

func (l *Link) newFollowups() *followups {
	fu := &followups{done: make(chan fuBatch)}
	every := l.cfg.RefreshEvery
	if every == 0 {
		every = DefaultRefreshEvery
	}
	if every > 0 {
		fu.ticker = time.NewTicker(every)
		fu.tick = fu.ticker.C
	}
	return fu
}

func (fu *followups) stop() {
	if fu.ticker != nil {
		fu.ticker.Stop()
	}
}

// Refresh asks the link to send actions to the PBX and apply their answers
// to the engine, as follow-ups (REST sends the AstDB reads of an extension
// after changing its forwards). Safe from any goroutine; it never blocks:
// when too many requests wait, it drops these and returns false.
func (l *Link) Refresh(actions ...ami.Message) bool {
	select {
	case l.reqs <- actions:
		return true
	default:
		return false
	}
}

// send runs actions in the background and delivers their answers on
// fu.done; it returns the batch id.
func (l *Link) send(ctx context.Context, wg *sync.WaitGroup, fu *followups, gen uint64, actions []ami.Message) uint64 {
	fu.nextID++
	id := fu.nextID
	wg.Go(func() {
		b := fuBatch{id: id, gen: gen, answers: l.doAll(ctx, actions)}
		select {
		case fu.done <- b:
		case <-ctx.Done():
		}
	})
	return id
}

// doAll sends actions, at most fuParallel at a time, and collects every
// answer in the actions' order.
func (l *Link) doAll(ctx context.Context, actions []ami.Message) []fuAnswer {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.ResyncTimeout)
	defer cancel()
	out := make([]fuAnswer, len(actions))
	sem := make(chan struct{}, fuParallel)
	var wg sync.WaitGroup
	for i, a := range actions {
		out[i].action = a
		if err := a.Validate(); err != nil {
			out[i].err = err // never sent: a header with CR, LF or NUL
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			out[i].resp, out[i].err = l.pbx.Do(ctx, a)
		})
	}
	wg.Wait()
	return out
}

// followResync starts the follow-ups of a resync whose lists were just
// applied. It returns false when the engine wants none: the resync can
// end at once.
func (l *Link) followResync(ctx context.Context, wg *sync.WaitGroup, fu *followups, gen uint64, r listResult) bool {
	acts := l.eng.Followups(calls.FollowResync)
	if len(acts) == 0 {
		return false
	}
	fu.resync = &resyncWait{start: time.Now(), lists: r.took, items: len(r.items)}
	fu.resync.id = l.send(ctx, wg, fu, gen, acts)
	return true
}

// answered applies a batch of answers. It returns the resync whose
// follow-ups are complete, nil otherwise: the caller then ends that
// resync. stale says the batch can no longer end a resync (another resync
// started, or the PBX is restarting).
func (l *Link) answered(ctx context.Context, wg *sync.WaitGroup, fu *followups, gen uint64, b fuBatch, stale bool) *resyncWait {
	isResync := fu.resync != nil && fu.resync.id == b.id
	if b.id == fu.bg {
		fu.bg = 0
	}
	if b.gen != gen {
		if isResync {
			fu.resync = nil
		}
		return nil // belongs to a connection that is gone
	}
	l.apply(b)
	if !isResync {
		l.eng.Publish()
		if l.ready.Load() {
			// What these answers asked for (an endpoint new since the last
			// list: its details) goes at once, not with the next event.
			l.background(ctx, wg, fu, gen, calls.FollowPending)
		}
		return nil
	}
	if stale {
		fu.resync = nil
		return nil
	}
	rw := fu.resync
	rw.rounds++
	if rw.rounds < fuRounds {
		if more := l.eng.Followups(calls.FollowPending); len(more) > 0 {
			rw.id = l.send(ctx, wg, fu, gen, more)
			return nil
		}
	}
	fu.resync = nil
	return rw
}

// apply hands a batch's answers to the engine and logs connection-level
// failures once per batch (refused actions are the engine's to log).
func (l *Link) apply(b fuBatch) {
	failed := 0
	var first error
	for _, a := range b.answers {
		var ae *ami.ActionError
		if a.err != nil && !errors.As(a.err, &ae) {
			if failed++; first == nil {
				first = a.err
			}
		}
		l.eng.ApplyAnswer(a.action, a.resp, a.err)
	}
	l.followed.Add(uint64(len(b.answers)))
	if failed > 0 {
		l.log.Warn("follow-up actions failed; what they read stays as it was", "failed", failed, "of", len(b.answers), "err", first)
	}
}

// background starts, unless one is in flight, a batch of what the engine
// asks (kind FollowPending or FollowRefresh) plus what Refresh queued.
func (l *Link) background(ctx context.Context, wg *sync.WaitGroup, fu *followups, gen uint64, kind calls.FollowupKind) {
	if fu.bg != 0 {
		return
	}
	acts := append(l.eng.Followups(kind), fu.extra...)
	fu.extra = nil
	if len(acts) > 0 {
		fu.bg = l.send(ctx, wg, fu, gen, acts)
	}
}

// requested queues actions asked for through Refresh.
func (fu *followups) requested(acts []ami.Message) {
	if len(fu.extra)+len(acts) <= maxRequested {
		fu.extra = append(fu.extra, acts...)
	}
}

// finishResync ends a resync: the state goes live.
