package wsbench

import (
	"bytes"
	"fmt"
	"net/url"
	"os"
	"sync/atomic"
	"time"

	"github.com/ctibridge/ctibridge/loadtest"
	"github.com/ctibridge/ctibridge/loadtest/internal/wsframe"
)

// load is the measuring clients: wsframe.Readers, a few goroutines
// reading every client's socket through epoll and looking only at the
// head of each message, so that the tool's own cost per delivered message
// is one read system call at most (several messages of a socket come in
// one read) and its CPU is left to the server it measures. It implements
// wsframe.Handler.
type load struct {
	measuring           atomic.Bool
	msgs, first0, last0 atomic.Uint64
	lost, odd           atomic.Uint64
	ready               chan error
	got                 []bool                // per client: has its snapshot (owned by its reader worker)
	hists               []*loadtest.Histogram // per reader worker
	rings               []*rings              // per reader worker, with -stamps
	readers             *wsframe.Readers
	workers             int
}

// newLoad makes the clients' reader; withRings follows the screens'
// ringing extensions (rings).
func newLoad(n, workers int, withRings bool) (*load, error) {
	l := &load{ready: make(chan error, n), got: make([]bool, n), workers: workers}
	for range workers {
		l.hists = append(l.hists, new(loadtest.Histogram))
		if withRings {
			l.rings = append(l.rings, newRings())
		}
	}
	r, err := wsframe.NewReaders(workers, l)
	if err != nil {
		return nil, err
	}
	l.readers = r
	return l, nil
}

// connect dials n clients, 64 at a time, each subscribing to the
// extensions; ready gets one result per client (its snapshot or its error).
func (l *load) connect(wsURL, token string, n int) error {
	u, err := url.Parse(wsURL)
	if err != nil {
		return err
	}
	sub := []byte(`{"op":"subscribe","topics":["extensions"]}`)
	sem := make(chan struct{}, 64)
	for i := range n {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			if err := l.readers.Dial(u.Host, u.Path, token, i, sub); err != nil {
				l.ready <- err
			}
		}()
	}
	return nil
}

func (l *load) Message(w, id int, head []byte, now int64) {
	if !l.got[id] {
		if bytes.HasPrefix(head, []byte(`{"op":"snapshot"`)) {
			l.got[id] = true
			l.ready <- nil
		}
		return
	}
	if !bytes.HasPrefix(head, []byte(`{"op":"event"`)) {
		return
	}
	measuring := l.measuring.Load()
	if l.rings != nil {
		l.rings[w].observe(id, head, now, measuring)
	}
	if !measuring {
		return
	}
	d := time.Duration(now - int64(wsframe.UintField(head, `"at":`))*int64(time.Millisecond))
	if d > 5*time.Second && l.odd.Add(1) == 1 {
		fmt.Fprintf(os.Stderr, "late or odd event (%v): %.200s\n", d, head)
	}
	l.hists[w].Record(d)
	if id == 0 {
		seq := wsframe.UintField(head, `"seq":`)
		if l.first0.Load() == 0 {
			l.first0.Store(seq)
		}
		l.last0.Store(seq)
	}
	l.msgs.Add(1)
}

func (l *load) Closed(w, id int, err error) {
	if !l.got[id] {
		l.ready <- err
	} else if l.measuring.Load() {
		l.lost.Add(1)
		fmt.Fprintln(os.Stderr, "client lost:", err)
	}
}
