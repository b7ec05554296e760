package loadtest

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// stateAt is a pbxStatus a client saw, with the time it read it.
type stateAt struct {
	at    time.Time
	state string // live, resyncing, stalled, down
}

// wsView is one WebSocket client of the failover scenario: it keeps the
// state it was sent (which extensions show a conversation, each
// extension's shown digest, the pbxStatus changes with their read times,
// the last seq and the epoch), and can disconnect and resume on another
// node with its seq and epoch. A view of a user limited to some
// extensions (own) also counts what it was shown of the others' calls
// (foCheckLeaks).
type wsView struct {
	own map[string]bool // nil: an admin's view, which sees every call in full

	mu       sync.Mutex // guards the fields below
	epoch    string
	seq      uint64
	inCall   map[string]bool
	digest   map[string]string // exten -> what it shows (foDigest)
	states   []stateAt
	answer   string // how the last subscribe was answered: snapshot or resumed
	answered chan struct{}
	err      error // why the connection ended, other than by close
	leaks    foLeaks

	conn *websocket.Conn
	done chan struct{} // the reader ended
}

func newWSView() *wsView {
	return &wsView{inCall: map[string]bool{}, digest: map[string]string{}}
}

// newUserView is the view of a user whose own extensions are own.
func newUserView(own []string) *wsView {
	v := newWSView()
	v.own = map[string]bool{}
	for _, x := range own {
		v.own[x] = true
	}
	return v
}

// foExten is what a view reads of an extension's JSON.
type foExten struct {
	Exten         string `json:"exten"`
	Status        string `json:"status"`
	Conversations map[string]struct {
		ID              string `json:"id"`
		Connected       bool   `json:"connected"`
		CounterpartNum  string `json:"counterpartNum"`
		CounterpartName string `json:"counterpartName"`
	} `json:"conversations"`
}

// foDigest is what e shows, as a string two views can compare: the
// status and each conversation (id, connected, number), sorted.
func foDigest(e foExten) string {
	var parts []string
	for k, c := range e.Conversations {
		parts = append(parts, fmt.Sprintf("%s=%s/%v/%s/%s", k, c.ID, c.Connected, c.CounterpartNum, c.CounterpartName))
	}
	slices.Sort(parts)
	return e.Status + " " + strings.Join(parts, " ")
}

// foLeaks is what a limited user's view was shown: conversations of its
// own extensions with their number (Full) or without, and of others'
// with a number, a name or a channel name in their id (a leak).
type foLeaks struct {
	ownFull, ownBlank, others, leaked int
	first                             []string // the first few leaks
}

// foCheckLeaks counts what e shows a view limited to own (v.mu held).
func (v *wsView) foCheckLeaks(e foExten) {
	if v.own == nil {
		return
	}
	for k, c := range e.Conversations {
		switch {
		case v.own[e.Exten] && c.CounterpartNum != "":
			v.leaks.ownFull++
		case v.own[e.Exten]:
			v.leaks.ownBlank++
		case c.CounterpartNum != "" || c.CounterpartName != "" || !opaqueID(k) || !opaqueID(c.ID):
			v.leaks.leaked++
			if len(v.leaks.first) < 5 {
				v.leaks.first = append(v.leaks.first, fmt.Sprintf("%s: conversation %s number %q name %q", e.Exten, k, c.CounterpartNum, c.CounterpartName))
			}
		default:
			v.leaks.others++
		}
	}
}

// opaqueID reports whether a conversation id names its channels by their
// opaque names only ("~…>~…", docs/websocket.md "Permissions"; a side
// with no channel, a call pbxsim answers itself, is empty).
func opaqueID(id string) bool {
	for side := range strings.SplitSeq(id, ">") {
		if side != "" && !strings.HasPrefix(side, "~") {
			return false
		}
	}
	return id != ""
}

// wsMsg is what a view reads of a message.
type wsMsg struct {
	Op    string `json:"op"`
	Seq   uint64 `json:"seq"`
	Epoch string `json:"epoch"`
	Type  string `json:"type"`
	Pbx   struct {
		Pbx string `json:"pbx"`
	} `json:"pbx"`
	Extensions map[string]foExten `json:"extensions"`
	Data       json.RawMessage    `json:"data"`
}

// connect dials base's /ws with token and subscribes to the extensions,
// resuming from the view's seq and epoch when resume is set (else it
// asks for a snapshot), and returns once the subscribe is answered.
func (v *wsView) connect(ctx context.Context, base, token string, resume bool) error {
	h := http.Header{}
	h.Set("Authorization", "Bearer "+token)
	d := websocket.Dialer{HandshakeTimeout: 10 * time.Second}
	c, _, err := d.DialContext(ctx, WSURL(base), h)
	if err != nil {
		return fmt.Errorf("loadtest: failover: WebSocket to %s: %w", base, err)
	}
	sub := map[string]any{"op": "subscribe", "topics": []string{"extensions"}}
	v.mu.Lock()
	if resume {
		sub["since"], sub["epoch"] = v.seq, v.epoch
	}
	v.conn, v.done, v.answered, v.answer, v.err = c, make(chan struct{}), make(chan struct{}), "", nil
	done, answered := v.done, v.answered
	v.mu.Unlock()
	go v.read(c, done)
	if err := c.WriteJSON(sub); err != nil {
		v.close()
		return fmt.Errorf("loadtest: failover: subscribe on %s: %w", base, err)
	}
	select {
	case <-answered:
		return nil
	case <-done:
		return fmt.Errorf("loadtest: failover: WebSocket on %s closed before the subscribe was answered: %v", base, v.lastErr())
	case <-time.After(10 * time.Second):
		v.close()
		return fmt.Errorf("loadtest: failover: no answer to the subscribe on %s in 10 s", base)
	}
}

// read applies the messages of c until it closes.
func (v *wsView) read(c *websocket.Conn, done chan struct{}) {
	defer close(done)
	for {
		_, raw, err := c.ReadMessage()
		now := time.Now()
		if err != nil {
			v.mu.Lock()
			if v.conn == c {
				v.err = err
			}
			v.mu.Unlock()
			return
		}
		var m wsMsg
		if json.Unmarshal(raw, &m) != nil {
			continue
		}
		v.apply(now, m)
	}
}

func (v *wsView) apply(now time.Time, m wsMsg) {
	v.mu.Lock()
	defer v.mu.Unlock()
	switch m.Op {
	case "hello":
		if v.epoch == "" {
			v.epoch = m.Epoch
		}
	case "snapshot", "resumed":
		if m.Op == "snapshot" {
			v.inCall, v.digest = map[string]bool{}, map[string]string{}
			for x, e := range m.Extensions {
				v.inCall[x], v.digest[x] = len(e.Conversations) > 0, foDigest(e)
				v.foCheckLeaks(e)
			}
			v.state(now, m.Pbx.Pbx)
			v.epoch = m.Epoch
		}
		v.seq = m.Seq
		if v.answer == "" {
			v.answer = m.Op
			close(v.answered)
		}
	case "event":
		v.seq = max(v.seq, m.Seq)
		switch m.Type {
		case "extenUpdate":
			var e foExten
			if json.Unmarshal(m.Data, &e) == nil {
				v.inCall[e.Exten], v.digest[e.Exten] = len(e.Conversations) > 0, foDigest(e)
				v.foCheckLeaks(e)
			}
		case "pbxStatus":
			var s struct {
				Pbx string `json:"pbx"`
			}
			if json.Unmarshal(m.Data, &s) == nil {
				v.state(now, s.Pbx)
			}
		}
	}
}

// state records a pbxStatus when it differs from the last one. v.mu held.
func (v *wsView) state(at time.Time, s string) {
	if n := len(v.states); s != "" && (n == 0 || v.states[n-1].state != s) {
		v.states = append(v.states, stateAt{at, s})
	}
}

// close ends the connection and waits for its reader.
func (v *wsView) close() {
	v.mu.Lock()
	c, done := v.conn, v.done
	v.conn = nil
	v.mu.Unlock()
	if c != nil {
		c.Close()
		<-done
	}
}

func (v *wsView) lastErr() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.err
}

// shown is the extensions the view shows with a conversation.
func (v *wsView) shown() map[string]bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := map[string]bool{}
	for x, in := range v.inCall {
		if in {
			out[x] = true
		}
	}
	return out
}

// position is the view's seq and how its last subscribe was answered.
func (v *wsView) position() (seq uint64, answer string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.seq, v.answer
}

// shows is the view's seq, epoch and every extension's digest.
func (v *wsView) shows() (seq uint64, epoch string, digest map[string]string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.seq, v.epoch, maps.Clone(v.digest)
}

// leaked is what the view of a limited user was shown (foLeaks).
func (v *wsView) leaked() foLeaks {
	v.mu.Lock()
	defer v.mu.Unlock()
	l := v.leaks
	l.first = slices.Clone(l.first)
	return l
}

// closed is closed once the view's connection has ended.
func (v *wsView) closed() <-chan struct{} {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.done == nil {
		c := make(chan struct{})
		close(c)
		return c
	}
	return v.done
}

// current is the last pbxStatus the view saw.
func (v *wsView) current() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.states) == 0 {
		return ""
	}
	return v.states[len(v.states)-1].state
}

// staleThenLive finds, after t, the first pbxStatus other than live and
// the first live after it (zero times when not seen yet).
func (v *wsView) staleThenLive(t time.Time) (stale stateAt, live time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, s := range v.states {
		switch {
		case !s.at.After(t):
		case stale.at.IsZero() && s.state != "live":
			stale = s
		case !stale.at.IsZero() && s.state == "live":
			return stale, s.at
		}
	}
	return stale, time.Time{}
}

// leaseAt is a change of the PBX's lease in the bus's KV bucket.
type leaseAt struct {
	at     time.Time
	holder string // "" when deleted
	rev    uint64
}

// leaseWatch follows the lease of a PBX (the bus's KV bucket, key the
// PBX's name: docs/scale-out.md) with a NATS connection of its own.
type leaseWatch struct {
	js  jetstream.JetStream
	kv  jetstream.KeyValue
	key string

	mu      sync.Mutex
	changes []leaseAt
}

// watchLease connects to urls and watches pbx's lease in bucket in wg
// until ctx ends; the bucket must exist (a bridge has started).
func watchLease(ctx context.Context, wg *sync.WaitGroup, urls, bucket, pbx string) (*leaseWatch, error) {
	nc, err := nats.Connect(urls, nats.MaxReconnects(-1))
	if err != nil {
		return nil, fmt.Errorf("loadtest: failover: NATS: %w", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("loadtest: failover: the lease bucket: %w", err)
	}
	w, err := kv.Watch(ctx, pbx)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("loadtest: failover: watching the lease: %w", err)
	}
	l := &leaseWatch{js: js, kv: kv, key: pbx}
	wg.Go(func() {
		defer nc.Close()
		defer w.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-w.Updates():
				if !ok {
					return
				}
				if e == nil {
					continue // the initial values are in
				}
				// The time JetStream stored the change (this machine's
				// clock, as the clients' read times are).
				c := leaseAt{at: e.Created(), rev: e.Revision()}
				if e.Operation() == jetstream.KeyValuePut {
					c.holder = string(e.Value())
				}
				l.mu.Lock()
				l.changes = append(l.changes, c)
				l.mu.Unlock()
			}
		}
	})
	return l, nil
}

// holder is the lease's holder as last seen ("" when none).
func (l *leaseWatch) holder() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.changes) == 0 {
		return ""
	}
	return l.changes[len(l.changes)-1].holder
}

// read is the lease's holder as a read of it now finds it ("" when
// none or unreadable): the watch may be behind after a NATS server's
// death.
func (l *leaseWatch) read(ctx context.Context) string {
	c, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	e, err := l.kv.Get(c, l.key)
	if err != nil {
		return ""
	}
	return string(e.Value())
}

// streamLeaders maps each JetStream stream (the op stream, the lease
// bucket's KV_ stream) to the server that leads it.
func (l *leaseWatch) streamLeaders(ctx context.Context) map[string]string {
	c, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	out := map[string]string{}
	for info := range l.js.ListStreams(c).Info() {
		if info.Cluster != nil {
			out[info.Config.Name] = info.Cluster.Leader
		}
	}
	return out
}

// caughtUp reports whether the watch has seen the lease's revision as a
// read of it now finds it: after a NATS server's death the watch's
// consumer may be behind for a while, and a takeover it has not seen
// would not be measured.
func (l *leaseWatch) caughtUp(ctx context.Context) bool {
	c, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	e, err := l.kv.Get(c, l.key)
	if err != nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.changes) > 0 && l.changes[len(l.changes)-1].rev >= e.Revision()
}

// holdersAfter lists the holders the lease was given to after t, in
// order, each once.
func (l *leaseWatch) holdersAfter(t time.Time) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, c := range l.changes {
		if c.at.After(t) && c.holder != "" && !slices.Contains(out, c.holder) {
			out = append(out, c.holder)
		}
	}
	return out
}

// takenAfter is the first change after t that gave the lease to a node
// other than dead, or to dead again once its process was restarted
// (after restarted): a renewal the dead leader sent just before its kill
// is not a takeover. Zero when none yet.
func (l *leaseWatch) takenAfter(t time.Time, dead string, restarted time.Time) leaseAt {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.changes {
		if c.at.After(t) && c.holder != "" && (c.holder != dead || (!restarted.IsZero() && c.at.After(restarted))) {
			return c
		}
	}
	return leaseAt{}
}
