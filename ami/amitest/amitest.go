package amitest

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
)

// The credentials a Server accepts.
const (
	User   = "ctibridge"
	Secret = "s3cr3t-amitest"
)

// WaitTimeout bounds every Wait method.
const WaitTimeout = 5 * time.Second

// Server is a fake Asterisk. The embedded ami.Server gives Handle,
// Broadcast, Sessions and Stats.
type Server struct {
	*ami.Server
	t  testing.TB
	ln net.Listener

	mu      sync.Mutex
	changed chan struct{} // closed and replaced when actions grows
	actions []ami.Message
	steps   map[string][]*Step // by lower-case action name
}

// NewServer starts a server on 127.0.0.1 accepting User/Secret, closed at
// the end of the test.
func NewServer(t testing.TB) *Server {
	return NewServerConfig(t, ami.ServerConfig{})
}

// NewServerConfig is NewServer with a configuration; Users defaults to
// User/Secret, and Trace is taken over.
func NewServerConfig(t testing.TB, cfg ami.ServerConfig) *Server {
	t.Helper()
	s := &Server{t: t, changed: make(chan struct{}), steps: map[string][]*Step{}}
	if cfg.Users == nil {
		cfg.Users = map[string]string{User: Secret}
	}
	cfg.Trace = s.trace
	s.Server = ami.NewServer(cfg)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("amitest: listen: %v", err)
	}
	s.ln = ln
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Serve(ln)
	}()
	t.Cleanup(func() {
		s.Close()
		<-done
	})
	return s
}

// Addr is the "host:port" to dial.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// ClientConfig returns a client configuration for this server with short
// timeouts and backoff, fit for tests.
func (s *Server) ClientConfig() ami.Config {
	return ami.Config{
		Addr: s.Addr(), Username: User, Secret: Secret,
		DialTimeout: time.Second, ActionTimeout: 2 * time.Second,
		ReconnectMin: 5 * time.Millisecond, ReconnectMax: 20 * time.Millisecond,
	}
}

// Connections is how many connections the server has accepted.
func (s *Server) Connections() int { return int(s.Stats().Accepted) }

// Drop closes every open session, as a crashing Asterisk would, and returns
// how many it closed.
func (s *Server) Drop() int {
	ss := s.Sessions()
	for _, se := range ss {
		se.Close()
	}
	return len(ss)
}

func (s *Server) trace(_ *ami.Session, m ami.Message) {
	s.mu.Lock()
	s.actions = append(s.actions, m)
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
}

// Actions returns every frame received so far, from every session, in
// arrival order.
func (s *Server) Actions() []ami.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]ami.Message(nil), s.actions...)
}

// Wait blocks until ok(actions received so far) holds and returns them; it
// fails the test after WaitTimeout.
func (s *Server) Wait(ok func([]ami.Message) bool) []ami.Message {
	s.t.Helper()
	deadline := time.NewTimer(WaitTimeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		acts, ch := s.actions, s.changed
		s.mu.Unlock()
		if ok(acts) {
			return append([]ami.Message(nil), acts...)
		}
		select {
		case <-ch:
		case <-deadline.C:
			s.t.Fatalf("amitest: condition not met within %v; received %d frames", WaitTimeout, len(acts))
			return nil
		}
	}
}

// WaitAction waits for the n-th (from 1) action named name and returns it.
func (s *Server) WaitAction(name string, n int) ami.Message {
	s.t.Helper()
	var found ami.Message
	s.Wait(func(acts []ami.Message) bool {
		k := 0
		for _, a := range acts {
			if strings.EqualFold(a.Action(), name) {
				if k++; k == n {
					found = a
					return true
				}
			}
		}
		return false
	})
	return found
}

// Silence makes the server ignore every later action named action (Ping:
// an Asterisk that hangs without closing the socket).
func (s *Server) Silence(action string) {
	s.Handle(action, func(context.Context, *ami.Session, ami.Message) []ami.Message { return nil })
}

// Step is one scripted exchange: see Expect.
type Step struct {
	action  string
	match   []string
	replies []ami.Message
	then    []ami.Message
	hold    bool
	used    bool
}

// Expect scripts the answer to the next action named action whose headers
// include the given key/value pairs. Steps for one action are used once
// each, in order; an action matching no unused step gets "Response: Error".
// Expect replaces any other handler of that action, built-ins included.
func (s *Server) Expect(action string, kv ...string) *Step {
	st := &Step{action: action, match: kv}
	key := strings.ToLower(action)
	s.mu.Lock()
	first := len(s.steps[key]) == 0
	s.steps[key] = append(s.steps[key], st)
	s.mu.Unlock()
	if first {
		s.Handle(action, s.runStep)
	}
	return st
}

// Reply sets the frames sent back, in order, each given the request's
// ActionID: the response and, for a list, its events.
func (st *Step) Reply(msgs ...ami.Message) *Step { st.replies = msgs; return st }

// Then sets frames sent after the replies, unchanged (unsolicited events).
func (st *Step) Then(msgs ...ami.Message) *Step { st.then = msgs; return st }

// Hold makes the step answer nothing at all (an Asterisk that stopped
// responding).
func (st *Step) Hold() *Step { st.hold = true; return st }

func (s *Server) runStep(_ context.Context, se *ami.Session, req ami.Message) []ami.Message {
	key := strings.ToLower(req.Action())
	s.mu.Lock()
	var st *Step
	for _, c := range s.steps[key] {
		if !c.used && matches(req, c.match) {
			st = c
			c.used = true
			break
		}
	}
	s.mu.Unlock()
	if st == nil {
		return []ami.Message{Response("Error", "Message", "amitest: unexpected action "+req.Action())}
	}
	if st.hold {
		return nil
	}
	id := req.ActionID()
	for _, m := range st.replies {
		if id != "" {
			m = m.Set("ActionID", id)
		}
		se.Send(m)
	}
	for _, m := range st.then {
		se.Send(m)
	}
	return nil
}

func matches(m ami.Message, kv []string) bool {
	for i := 0; i+1 < len(kv); i += 2 {
		if v, ok := m.Lookup(kv[i]); !ok || v != kv[i+1] {
			return false
		}
	}
	return true
}

// Response builds a response frame: Response: status, then kv pairs.
func Response(status string, kv ...string) ami.Message {
	m := ami.NewMessage(ami.Header{Key: "Response", Value: status})
	for i := 0; i+1 < len(kv); i += 2 {
		m = m.Add(kv[i], kv[i+1])
	}
	return m
}

// Event builds an event frame: Event: name, then kv pairs.
func Event(name string, kv ...string) ami.Message {
	m := ami.NewMessage(ami.Header{Key: "Event", Value: name})
	for i := 0; i+1 < len(kv); i += 2 {
		m = m.Add(kv[i], kv[i+1])
	}
	return m
}

// Replay makes every later connection replay a recording (an .ami file: the
// banner line, the login response, then everything else). The client's
// Login is answered with the recording's own login response, its ActionID
// line rewritten to the client's, followed at once by the rest of the bytes
// exactly as recorded, so the login response and the first events share a
// write as they do with Asterisk. chunk > 0 splits the stream into writes of
// that many bytes to exercise split reads. The recording's banner must be
// the server's (ami.DefaultBanner unless configured otherwise).
func (s *Server) Replay(data []byte, chunk int) {
	s.t.Helper()
	nl := bytes.IndexByte(data, '\n')
	end := bytes.Index(data, []byte("\r\n\r\n"))
	if nl < 0 || end < nl {
		s.t.Fatal("amitest: replay: no banner and login response in the recording")
	}
	resp, rest := data[nl+1:end+4], data[end+4:]
	s.Handle(ami.ActionLogin, func(_ context.Context, se *ami.Session, req ami.Message) []ami.Message {
		if req.Get("Username") != User {
			return []ami.Message{Response("Error", "Message", "Authentication failed")}
		}
		se.Authorize(User, true)
		se.SendRaw(append(rewriteActionID(resp, req.ActionID()), rest...), chunk)
		return nil
	})
}

// rewriteActionID replaces the value of the ActionID line of one frame.
func rewriteActionID(frame []byte, id string) []byte {
	var out []byte
	for line := range bytes.Lines(frame) {
		if k, _, ok := bytes.Cut(line, []byte(":")); ok && strings.EqualFold(string(k), "ActionID") {
			out = append(out, "ActionID: "+id+"\r\n"...)
			continue
		}
		out = append(out, line...)
	}
	return out
}

// ReadRecording returns every message of a recorded .ami file (banner
// first, as ami's testdata and `serve --record-ami` write them), in order.
func ReadRecording(t testing.TB, path string) []ami.Message {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("amitest: %v", err)
	}
	r := ami.NewReader(bufio.NewReader(bytes.NewReader(data)), ami.ReaderConfig{})
	if _, err := r.ReadBanner(); err != nil {
		t.Fatalf("amitest: %s: %v", path, err)
	}
	var out []ami.Message
	for {
		m, err := r.ReadMessage()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("amitest: %s: %v", path, err)
		}
		out = append(out, m)
	}
}
