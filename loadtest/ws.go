package loadtest

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/ctibridge/ctibridge/loadtest/internal/wsframe"
)

// WSConfig is one `loadtest ws` run against ctibridge's /ws
// (docs/websocket.md).
type WSConfig struct {
	// URL is ws://host:port/ws or wss://. Required.
	URL string
	// Token authenticates every client (Authorization: Bearer).
	Token string
	// Clients to connect. Default 100.
	Clients int
	// RampUp is how many clients connect per second. Default 0: all at
	// once (64 handshakes at a time).
	RampUp float64
	// Topics to subscribe to. Default ["extensions"].
	Topics []string
	// Duration of the run, from the first connection. Default 10 s.
	Duration time.Duration
	// Grace bounds the time taken to close after Duration. Default 2 s.
	Grace time.Duration
	// Insecure skips TLS certificate verification (wss).
	Insecure bool
	// Progress, when set, is called once a second.
	Progress func(Second)
	// OnEvent, when set, receives every event message of every client with
	// the time it was read, from the client's goroutine (the e2e run uses
	// it). raw is only valid during the call.
	OnEvent func(client int, at time.Time, raw []byte)
	// OnSubscribed, when set, is called once per client when its first
	// snapshot arrives, from the client's goroutine.
	OnSubscribed func(client int)
	// OnResync, when set, receives every snapshot after a client's first
	// (the server replaced its overflowing queue: the snapshot holds the
	// state the skipped events led to), with its read time.
	OnResync func(client int, at time.Time, raw []byte)
	// OnDropped, when set, is called when a subscribed client's
	// connection is lost (closed by the server, 4008 when too slow),
	// not when the run ends it.
	OnDropped func(client int)
	// Epoll reads the clients with wsframe's epoll Readers (Linux, ws://;
	// otherwise gorilla's client, a goroutine each): a client costs a
	// socket and a little state, and a few goroutines read them all, so
	// thousands of clients leave the machine to the server they measure.
	// The callbacks are then called from those goroutines, never
	// concurrently for one client.
	Epoll bool
}

// wsRun is the state of one RunWS.
type wsRun struct {
	cfg     WSConfig
	errs    errorCounts
	dialer  websocket.Dialer
	header  http.Header
	sub     []byte
	connect chan struct{} // handshake slots

	connected, failed, dropped atomic.Uint64
	snapshots, events          atomic.Uint64
	start                      time.Time
}

// connectAt is when client i may connect (RampUp), zero for at once.
func (r *wsRun) connectAt(i int) time.Time {
	if r.cfg.RampUp <= 0 {
		return time.Time{}
	}
	return r.start.Add(time.Duration(float64(i) / r.cfg.RampUp * 1e9))
}

// waitTurn waits for client i's time and a handshake slot (release it
// with <-r.connect); false when ctx ended first.
func (r *wsRun) waitTurn(ctx context.Context, i int) bool {
	if at := r.connectAt(i); !at.IsZero() {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(time.Until(at)):
		}
	}
	select {
	case r.connect <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

// RunWS connects the clients, subscribes them, and measures until the
// duration is over. Every event's latency is its read time minus its "at"
// (the engine's publish time, in ms: so a latency is exact to 1 ms, and
// client and server clocks must agree, as on one machine). It checks that
// no client sees a seq lower than one it saw before.
func RunWS(ctx context.Context, cfg WSConfig) (*Report, error) {
	if cfg.Clients <= 0 {
		cfg.Clients = 100
	}
	if cfg.Duration <= 0 {
		cfg.Duration = 10 * time.Second
	}
	if cfg.Grace <= 0 {
		cfg.Grace = 2 * time.Second
	}
	if len(cfg.Topics) == 0 {
		cfg.Topics = []string{"extensions"}
	}
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "ws" && u.Scheme != "wss") || u.Host == "" {
		return nil, kindError{ErrBadURL, fmt.Sprintf("loadtest: bad WebSocket URL %q: want ws://host:port/ws or wss://", cfg.URL)}
	}
	r := &wsRun{cfg: cfg, header: http.Header{}, connect: make(chan struct{}, 64)}
	if cfg.Token != "" {
		r.header.Set("Authorization", "Bearer "+cfg.Token)
	}
	r.dialer = websocket.Dialer{HandshakeTimeout: 10 * time.Second, ReadBufferSize: 16 << 10, WriteBufferSize: 4 << 10,
		TLSClientConfig: &tls.Config{InsecureSkipVerify: cfg.Insecure}}
	r.sub, _ = json.Marshal(map[string]any{"op": "subscribe", "topics": cfg.Topics})

	runCtx, stop := context.WithTimeout(ctx, cfg.Duration)
	defer stop()
	cpu0, mach0 := cpuTime(), machineCPU()
	start := time.Now()
	rep := &Report{Mode: "ws", Target: cfg.URL, Connections: cfg.Clients, Started: start}
	s := newSampler(start, cfg.Progress)
	workers := make([]*worker, cfg.Clients)
	for i := range workers {
		workers[i] = &worker{id: i}
		s.add(workers[i])
	}
	r.start = start
	var done chan struct{}
	if cfg.Epoll && u.Scheme == "ws" {
		done = r.runEpoll(runCtx, u, workers)
	}
	readers := 0 // epoll readers' goroutines; 0: gorilla's client
	switch {
	case done != nil:
		readers = runtime.GOMAXPROCS(0)
		rep.Notes = append(rep.Notes, fmt.Sprintf("clients read by wsframe's epoll Readers: %d goroutines for %d connections", readers, cfg.Clients))
	case cfg.Epoll:
		rep.Notes = append(rep.Notes, "epoll asked for, but it reads ws:// on Linux only: gorilla's client read the clients, a goroutine each")
	}
	if done == nil {
		done = r.runGorilla(runCtx, workers)
	}
	// The grace: clients that do not close in time are left behind only
	// as far as the report goes; their goroutines end with their
	// connections, which the deadline has cut.
	s.run(done)
	rep.Elapsed = min(time.Since(start), cfg.Duration)
	s.fill(rep)
	rep.Errors, rep.FirstErrors = r.errs.snapshot()
	rep.Counters = map[string]uint64{
		"clients_connected": r.connected.Load(),
		"clients_failed":    r.failed.Load(),
		"clients_dropped":   r.dropped.Load(),
		"snapshots":         r.snapshots.Load(),
		"events":            r.events.Load(),
		"seq_backwards":     rep.Errors[ErrSeqBack],
		"epoll_readers":     uint64(readers),
	}
	rep.ClientCPU = (cpuTime() - cpu0).Seconds() / time.Since(start).Seconds()
	if m1 := machineCPU(); mach0 != nil && m1 != nil {
		rep.MachineCPU = m1.busySince(mach0)
	}
	rep.Notes = append(rep.Notes, bottleneckNotes(rep, u.Host)...)
	if r.events.Load() == 0 {
		rep.Notes = append(rep.Notes, "no events arrived during the run: nothing changed on the PBX, so there is no latency to measure (run calls, e.g. ctibridge-lab loadtest e2e, or the demo)")
	}
	return rep, nil
}

// wsClient is what a client's reader keeps from one message to the next.
type wsClient struct {
	n          int    // text messages read
	last       uint64 // the highest seq seen
	subscribed bool   // its first snapshot arrived
}

// message handles one text message that client w read at now: both
// readers (gorilla's, ws_gorilla.go, and wsframe's epoll Readers,
// ws_epoll.go) hand every message here.
func (r *wsRun) message(w *worker, st *wsClient, now time.Time, raw []byte) {
	n := st.n
	st.n++
	// The hub writes op, seq, type and at first: scanning the head
	// keeps the client cheap enough for thousands of connections. Full
	// validation runs on the first messages and one in 64 after.
	if len(raw) < 2 || raw[0] != '{' || raw[len(raw)-1] != '}' || ((n < 8 || n%64 == 0) && !json.Valid(raw)) {
		r.errs.addKind(ErrNotJSON, fmt.Sprintf("not JSON: %q", trunc(raw)))
		return
	}
	switch string(wsframe.Field(raw, `"op":"`)) {
	case "snapshot":
		r.snapshots.Add(1)
		st.last = wsframe.UintField(raw, `"seq":`)
		if st.subscribed && r.cfg.OnResync != nil {
			r.cfg.OnResync(w.id, now, raw)
		}
		if !st.subscribed {
			st.subscribed = true
			r.connected.Add(1)
			if r.cfg.OnSubscribed != nil {
				r.cfg.OnSubscribed(w.id)
			}
		}
	case "event":
		seq := wsframe.UintField(raw, `"seq":`)
		if seq < st.last {
			r.errs.addKind(ErrSeqBack, fmt.Sprintf("client %d: seq %d after %d", w.id, seq, st.last))
		}
		st.last = max(st.last, seq)
		r.events.Add(1)
		if pub := wsframe.UintField(raw, `"at":`); pub > 0 {
			w.record(time.Duration(now.UnixMicro()-int64(pub)*1000)*time.Microsecond, 200, uint64(len(raw)))
		}
		if r.cfg.OnEvent != nil {
			r.cfg.OnEvent(w.id, now, raw)
		}
	case "resumed", "hello", "pong", "renewed":
	default:
		r.errs.addKind(ErrBadResponse, fmt.Sprintf("unknown message %q", trunc(raw)))
	}
}

// binary counts a binary frame (ctibridge sends none).
func (r *wsRun) binary(n int) {
	r.errs.addKind(ErrBinary, fmt.Sprintf("a binary frame of %d bytes", n))
}

// lost counts a client whose connection ended before the run did:
// dropped once subscribed, failed before.
func (r *wsRun) lost(w *worker, st *wsClient) {
	if !st.subscribed {
		r.failed.Add(1)
		return
	}
	r.dropped.Add(1)
	if r.cfg.OnDropped != nil {
		r.cfg.OnDropped(w.id)
	}
}

// dialError counts a failed handshake by kind: the HTTP status when the
// server answered, the network error otherwise.
func (r *wsRun) dialError(err error, resp *http.Response) {
	if resp != nil {
		kind := ErrHandshake
		if resp.StatusCode == 401 || resp.StatusCode == 403 {
			kind = ErrAuth
		}
		r.errs.addKind(kind, fmt.Sprintf("handshake: HTTP %d: %v", resp.StatusCode, err))
		return
	}
	if errors.Is(err, websocket.ErrBadHandshake) {
		r.errs.addKind(ErrHandshake, err.Error())
		return
	}
	r.errs.add(err)
}

// closeError counts a connection lost after subscribing: the server's
// close code (4001-4003 auth, 4004 protocol, 4008 too slow) or the
// network error.
func (r *wsRun) closeError(err error) {
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		r.errs.addKind(closeKind(ce.Code), err.Error())
		return
	}
	r.errs.add(err)
}

// closeKind is the error kind of a server's close code.
func closeKind(code int) string {
	if code >= 4001 && code <= 4003 {
		return ErrAuth
	}
	return fmt.Sprintf("ws_close_%d", code)
}

// WSURL turns an http(s) base into the ws(s) URL of /ws.
func WSURL(base string) string {
	u := strings.TrimSuffix(base, "/")
	switch {
	case strings.HasPrefix(u, "https://"):
		u = "wss://" + u[len("https://"):]
	case strings.HasPrefix(u, "http://"):
		u = "ws://" + u[len("http://"):]
	}
	if !strings.HasSuffix(u, "/ws") {
		u += "/ws"
	}
	return u
}
