package loadtest

import (
	"context"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// runGorilla runs each client on gorilla's WebSocket client, a goroutine
// each; done closes when they have all ended.
func (r *wsRun) runGorilla(ctx context.Context, workers []*worker) (done chan struct{}) {
	var wg sync.WaitGroup
	for i, w := range workers {
		wg.Go(func() { r.client(ctx, w, i) })
	}
	done = make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	return done
}

// client runs client i (w) until ctx ends.
func (r *wsRun) client(ctx context.Context, w *worker, i int) {
	if !r.waitTurn(ctx, i) {
		return
	}
	c, resp, err := r.dialer.DialContext(ctx, r.cfg.URL, r.header)
	<-r.connect
	if err != nil {
		if ctx.Err() == nil {
			r.failed.Add(1)
			r.dialError(err, resp)
		}
		return
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	if err := c.WriteMessage(websocket.TextMessage, r.sub); err != nil {
		r.failed.Add(1)
		r.errs.add(err)
		return
	}
	var st wsClient
	for {
		typ, raw, err := c.ReadMessage()
		now := time.Now()
		if err != nil {
			if ctx.Err() != nil {
				c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(100*time.Millisecond))
				return
			}
			r.lost(w, &st)
			r.closeError(err)
			return
		}
		if typ != websocket.TextMessage {
			r.binary(len(raw))
			continue
		}
		r.message(w, &st, now, raw)
	}
}
