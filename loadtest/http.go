package loadtest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// HTTPConfig is one `loadtest http` run.
type HTTPConfig struct {
	// URL is the target, http:// or https://. Required.
	URL string
	// Connections kept open. Default 10.
	Connections int
	// Duration of the run. Default 10 s unless Requests is set.
	Duration time.Duration
	// Requests stops the run after this many requests (0: no limit).
	Requests int64
	// Pipelining is the number of requests written before reading their
	// responses (HTTP/1.1 pipelining). Default 1.
	Pipelining int
	// Rate, when > 0, makes the run open-loop: requests are due at Rate per
	// second in total, spread evenly over the connections, and each
	// latency runs from the time the request was due, not from when it
	// could be sent, so a stalled server shows in the percentiles
	// (coordinated omission). Default 0: closed loop, as fast as answered.
	Rate float64
	// Method defaults to GET (POST when Body is set).
	Method string
	Body   []byte
	// Headers are added to every request ("Name: value").
	Headers []string
	// Token, when set, is sent as "Authorization: Bearer <Token>".
	Token string
	// Timeout bounds each response. Default 10 s.
	Timeout time.Duration
	// Grace is how long the run may take past Duration to end. Default 2 s.
	Grace time.Duration
	// Insecure skips TLS certificate verification.
	Insecure bool
	// Progress, when set, is called once a second with the last second.
	Progress func(Second)
}

// target is a parsed URL.
type target struct {
	addr, host string
	tls        bool
	request    []byte // one request, ready to write
}

func parseTarget(c *HTTPConfig) (*target, error) {
	u, err := url.Parse(c.URL)
	if err != nil {
		return nil, kindError{ErrBadURL, fmt.Sprintf("loadtest: bad URL %q: %v", c.URL, err)}
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, kindError{ErrBadURL, fmt.Sprintf("loadtest: bad URL %q: the scheme must be http or https", c.URL)}
	}
	if u.Host == "" || u.Hostname() == "" {
		return nil, kindError{ErrBadURL, fmt.Sprintf("loadtest: bad URL %q: no host", c.URL)}
	}
	t := &target{host: u.Host, tls: u.Scheme == "https", addr: u.Host}
	if u.Port() == "" {
		t.addr = net.JoinHostPort(u.Hostname(), map[bool]string{false: "80", true: "443"}[t.tls])
	}
	method := c.Method
	if method == "" {
		method = "GET"
		if c.Body != nil {
			method = "POST"
		}
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: ctibridge-loadtest\r\n", method, u.RequestURI(), u.Host)
	if c.Token != "" {
		fmt.Fprintf(&b, "Authorization: Bearer %s\r\n", c.Token)
	}
	for _, h := range c.Headers {
		if strings.ContainsAny(h, "\r\n") || !strings.Contains(h, ":") {
			return nil, kindError{ErrBadURL, fmt.Sprintf("loadtest: bad header %q: want \"Name: value\" on one line", h)}
		}
		b.WriteString(h + "\r\n")
	}
	if c.Body != nil {
		if !hasHeader(c.Headers, "content-type") {
			b.WriteString("Content-Type: application/json\r\n")
		}
		fmt.Fprintf(&b, "Content-Length: %d\r\n", len(c.Body))
	}
	b.WriteString("\r\n")
	b.Write(c.Body)
	t.request = b.Bytes()
	return t, nil
}

func hasHeader(hs []string, name string) bool {
	for _, h := range hs {
		k, _, _ := strings.Cut(h, ":")
		if strings.EqualFold(strings.TrimSpace(k), name) {
			return true
		}
	}
	return false
}

// worker is one connection's goroutine(s) and what they measured since the
// sampler last looked.
type worker struct {
	id int

	mu       sync.Mutex // guards the fields below; taken once per response
	hist     Histogram
	reqs     uint64
	bytes    uint64
	non2xx   uint64
	status   map[int]uint64
	behindNS int64 // open loop: how late requests were sent, summed
	sent     uint64

	k int64 // open loop: next slot of the schedule; owned by the writer
}

func (w *worker) record(lat time.Duration, status int, n uint64) {
	w.mu.Lock()
	w.hist.Record(lat)
	w.reqs++
	w.bytes += n
	if status < 200 || status > 299 {
		w.non2xx++
		if w.status == nil {
			w.status = map[int]uint64{}
		}
		w.status[status]++
	}
	w.mu.Unlock()
}

// httpRun is the state of one RunHTTP.
type httpRun struct {
	cfg     HTTPConfig
	t       *target
	tlsConf *tls.Config
	start   time.Time
	end     time.Time // zero without a duration
	errs    errorCounts
	tickets atomic.Int64 // requests left when cfg.Requests > 0
	workers []*worker
}

// RunHTTP runs the load and returns its report. It returns an error only
// when the run cannot start (a bad URL); everything that goes wrong during
// the run is counted in Report.Errors.
func RunHTTP(ctx context.Context, cfg HTTPConfig) (*Report, error) {
	if cfg.Connections <= 0 {
		cfg.Connections = 10
	}
	if cfg.Pipelining <= 0 {
		cfg.Pipelining = 1
	}
	if cfg.Duration <= 0 && cfg.Requests <= 0 {
		cfg.Duration = 10 * time.Second
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Grace <= 0 {
		cfg.Grace = 2 * time.Second
	}
	t, err := parseTarget(&cfg)
	if err != nil {
		return nil, err
	}
	r := &httpRun{cfg: cfg, t: t}
	if t.tls {
		host, _, _ := net.SplitHostPort(t.addr)
		r.tlsConf = &tls.Config{ServerName: host, InsecureSkipVerify: cfg.Insecure, NextProtos: []string{"http/1.1"}}
	}
	r.tickets.Store(cfg.Requests)

	// runCtx ends the load at Duration; hard ends everything at Duration
	// plus Grace, whatever is in flight.
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	if cfg.Duration > 0 {
		runCtx, stop = context.WithTimeout(ctx, cfg.Duration)
		defer stop()
	}
	cpu0, mach0 := cpuTime(), machineCPU()
	r.start = time.Now()
	if dl, ok := runCtx.Deadline(); ok {
		r.end = dl
	}
	rep := &Report{Mode: "http", Target: cfg.URL, Connections: cfg.Connections, Pipelining: cfg.Pipelining,
		Rate: cfg.Rate, Started: r.start, Latency: &Histogram{}}
	s := newSampler(r.start, cfg.Progress)
	var wg sync.WaitGroup
	for i := range cfg.Connections {
		w := &worker{id: i}
		r.workers = append(r.workers, w)
		s.add(w)
		wg.Go(func() { r.connLoop(runCtx, w) })
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	s.run(done)
	rep.Elapsed = time.Since(r.start)
	if cfg.Duration > 0 {
		// Responses cut by the end of the run do not stretch it.
		rep.Elapsed = min(rep.Elapsed, cfg.Duration)
	}
	s.fill(rep)
	rep.Errors, rep.FirstErrors = r.errs.snapshot()
	rep.ClientCPU = (cpuTime() - cpu0).Seconds() / time.Since(r.start).Seconds()
	if mach0 != nil {
		if m1 := machineCPU(); m1 != nil {
			rep.MachineCPU = m1.busySince(mach0)
		}
	}
	var behind time.Duration
	var sent uint64
	for _, w := range r.workers {
		behind += time.Duration(w.behindNS)
		sent += w.sent
	}
	rep.Notes = append(rep.Notes, bottleneckNotes(rep, t.addr)...)
	if cfg.Rate > 0 && sent > 0 {
		want := cfg.Rate * rep.Elapsed.Seconds()
		if float64(sent) < 0.95*want {
			rep.Notes = append(rep.Notes, fmt.Sprintf("open loop: sent %.0f requests/s of the %.0f asked; the missing ones queued behind slow responses (their wait is in the latencies) or the client could not keep up",
				float64(sent)/rep.Elapsed.Seconds(), cfg.Rate))
		}
		if avg := behind / time.Duration(sent); avg > time.Millisecond {
			rep.Notes = append(rep.Notes, fmt.Sprintf("open loop: requests left on average %v after they were due (counted in the latencies)", avg.Round(time.Microsecond)))
		}
	}
	return rep, nil
}

// dial opens one connection, with TLS when the URL says https.
func (r *httpRun) dial(ctx context.Context) (net.Conn, error) {
	d := net.Dialer{Timeout: r.cfg.Timeout}
	c, err := d.DialContext(ctx, "tcp", r.t.addr)
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	if r.tlsConf != nil {
		tc := tls.Client(c, r.tlsConf)
		hctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			c.Close()
			return nil, err
		}
		c = tc
	}
	return c, nil
}

// over says whether the run has ended: errors then are the cut of the
// end (a dial's own timer may fire just before the context's).
func (r *httpRun) over(ctx context.Context) bool {
	return ctx.Err() != nil || (!r.end.IsZero() && !time.Now().Before(r.end))
}

// take reserves one request when the run has a request count.
func (r *httpRun) take() bool {
	if r.cfg.Requests <= 0 {
		return true
	}
	return r.tickets.Add(-1) >= 0
}

// connLoop keeps one connection busy until ctx ends, reconnecting after
// errors (counted by kind).
func (r *httpRun) connLoop(ctx context.Context, w *worker) {
	for ctx.Err() == nil {
		c, err := r.dial(ctx)
		if err != nil {
			if r.over(ctx) {
				return
			}
			r.errs.add(err)
			// A refused or failing dial would otherwise spin: retry at
			// most every 50 ms per connection.
			select {
			case <-ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		// Cutting the connection is how the end of the run interrupts a
		// read or write in flight.
		stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
		var more bool
		if r.cfg.Rate > 0 {
			more = r.openLoop(ctx, w, c)
		} else {
			more = r.closedLoop(ctx, w, c)
		}
		stop()
		c.Close()
		if !more {
			return
		}
	}
}

// countingConn counts the bytes read.
type countingConn struct {
	net.Conn
	n uint64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n += uint64(n)
	return n, err
}

// closedLoop writes Pipelining requests, reads their responses, and
// repeats. It returns false when the run is over, true to reconnect.
func (r *httpRun) closedLoop(ctx context.Context, w *worker, c net.Conn) bool {
	cc := &countingConn{Conn: c}
	br := bufio.NewReaderSize(cc, 64<<10)
	p := r.cfg.Pipelining
	batch := bytes.Repeat(r.t.request, p)
	for {
		if ctx.Err() != nil {
			return false
		}
		n := p
		if r.cfg.Requests > 0 {
			for n = 0; n < p && r.take(); n++ {
			}
			if n == 0 {
				return false
			}
		}
		sent := time.Now()
		c.SetDeadline(sent.Add(r.cfg.Timeout))
		if _, err := c.Write(batch[:n*len(r.t.request)]); err != nil {
			return r.failed(ctx, err)
		}
		for range n {
			before := cc.n - uint64(br.Buffered())
			status, closeAfter, err := readResponse(br)
			if err != nil {
				return r.failed(ctx, err)
			}
			w.record(time.Since(sent), status, cc.n-uint64(br.Buffered())-before)
			if closeAfter {
				return true
			}
		}
	}
}

// failed counts err unless the run is over; it says whether to reconnect.
func (r *httpRun) failed(ctx context.Context, err error) bool {
	if r.over(ctx) {
		return false
	}
	r.errs.add(err)
	return true
}

// schedule is when the k-th request (from 0) of connection i of n is due
// in an open-loop run at rate requests/s in total: each connection sends
// every n/rate seconds, the connections offset from each other by 1/rate.
func schedule(start time.Time, rate float64, n, i int, k int64) time.Time {
	per := float64(n) / rate // seconds between two requests of one connection
	return start.Add(time.Duration((float64(k)*per + float64(i)/rate) * 1e9))
}

// openLoop sends each request when it is due (or as soon as the
// pipelining window allows) and times it from when it was due.
func (r *httpRun) openLoop(ctx context.Context, w *worker, c net.Conn) bool {
	cc := &countingConn{Conn: c}
	br := bufio.NewReaderSize(cc, 64<<10)
	due := make(chan time.Time, r.cfg.Pipelining) // the window: requests in flight
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var writeErr error
	wg.Go(func() {
		defer close(due)
		bw := bufio.NewWriterSize(c, 16<<10)
		for {
			k := w.nextK()
			at := schedule(r.start, r.cfg.Rate, r.cfg.Connections, w.id, k)
			if d := time.Until(at); d > 0 {
				select {
				case <-wctx.Done():
					return
				case <-time.After(d):
				}
			}
			if wctx.Err() != nil || !r.take() {
				return
			}
			select {
			case due <- at:
			case <-wctx.Done():
				return
			}
			late := time.Since(at)
			w.mu.Lock()
			w.behindNS += int64(late)
			w.sent++
			w.mu.Unlock()
			bw.Write(r.t.request)
			if err := bw.Flush(); err != nil {
				writeErr = err
				return
			}
		}
	})
	defer wg.Wait()
	for at := range due {
		c.SetReadDeadline(time.Now().Add(r.cfg.Timeout))
		before := cc.n - uint64(br.Buffered())
		status, closeAfter, err := readResponse(br)
		if err != nil {
			cancel()
			c.SetDeadline(time.Unix(1, 0))
			wg.Wait()
			// The requests in flight are lost with the connection;
			// their schedule slots are taken again after reconnecting.
			return r.failed(ctx, err)
		}
		w.record(time.Since(at), status, cc.n-uint64(br.Buffered())-before)
		if closeAfter {
			cancel()
			c.SetDeadline(time.Unix(1, 0))
			wg.Wait()
			return true
		}
	}
	if writeErr != nil {
		return r.failed(ctx, writeErr)
	}
	return ctx.Err() == nil && r.cfg.Requests <= 0
}

// nextK is the index in the connection's schedule of its next request.
// Only the open-loop writer calls it; the schedule goes on across
// reconnects (requests lost with a connection are counted as errors).
func (w *worker) nextK() int64 {
	k := w.k
	w.k++
	return k
}
