package loadtest

import (
	"context"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ctibridge/ctibridge/loadtest/internal/wsframe"
)

// wsEpoll reads a run's clients through wsframe's epoll Readers: it is
// their Handler, and hands every message to wsRun.message as gorilla's
// reader does.
type wsEpoll struct {
	r       *wsRun
	ctx     context.Context
	workers []*worker
	st      []wsClient // each guarded by the Readers' worker that owns the client
	pending atomic.Int64
	allGone chan struct{} // closed when no client is left
	once    sync.Once
}

// runEpoll connects the clients through Readers; done closes when ctx
// ends or every client has failed or been dropped. It returns nil when
// Readers cannot run here (not Linux).
func (r *wsRun) runEpoll(ctx context.Context, u *url.URL, workers []*worker) (done chan struct{}) {
	e := &wsEpoll{r: r, ctx: ctx, workers: workers, st: make([]wsClient, len(workers)), allGone: make(chan struct{})}
	readers, err := wsframe.NewWholeReaders(runtime.GOMAXPROCS(0), e)
	if err != nil {
		return nil
	}
	e.pending.Store(int64(len(workers)))
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	if u.RawQuery != "" {
		path += "?" + u.RawQuery
	}
	var dials sync.WaitGroup
	for i := range workers {
		dials.Go(func() {
			if !r.waitTurn(ctx, i) {
				e.gone()
				return
			}
			err := readers.Dial(u.Host, path, r.cfg.Token, i, r.sub)
			<-r.connect
			if err != nil {
				if ctx.Err() == nil {
					r.failed.Add(1)
					r.epollError(err)
				}
				e.gone()
			}
		})
	}
	done = make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
		case <-e.allGone:
		}
		dials.Wait()
		readers.Close()
		close(done)
	}()
	return done
}

// gone counts a client that will read no more.
func (e *wsEpoll) gone() {
	if e.pending.Add(-1) == 0 {
		e.once.Do(func() { close(e.allGone) })
	}
}

// Message implements wsframe.Handler.
func (e *wsEpoll) Message(_, id int, msg []byte, now int64) {
	e.r.message(e.workers[id], &e.st[id], time.Unix(0, now), msg)
}

// Binary implements wsframe.BinaryHandler.
func (e *wsEpoll) Binary(_, _ int, n uint64) { e.r.binary(int(n)) }

// Closed implements wsframe.Handler: the server closed the connection,
// or it broke (the run's own end closes none through here).
func (e *wsEpoll) Closed(_, id int, err error) {
	defer e.gone()
	if e.ctx.Err() != nil {
		return
	}
	e.r.lost(e.workers[id], &e.st[id])
	e.r.epollError(err)
}

// epollError counts what ended a Readers connection (or its Dial) by
// kind, as dialError and closeError do gorilla's: the server's close code,
// a handshake refused with 401/403 or another HTTP answer, or the network
// error.
func (r *wsRun) epollError(err error) {
	msg := err.Error()
	if code, ok := strings.CutPrefix(msg, "ws_close_"); ok {
		n, _ := strconv.Atoi(code)
		r.errs.addKind(closeKind(n), msg)
		return
	}
	if _, status, ok := strings.Cut(msg, "upgrade: HTTP/1.1 "); ok {
		kind := ErrHandshake
		if strings.HasPrefix(status, "401") || strings.HasPrefix(status, "403") {
			kind = ErrAuth
		}
		r.errs.addKind(kind, "handshake: HTTP "+status)
		return
	}
	r.errs.add(err)
}
