package ws

import (
	"sync"
	"syscall"
	"time"

	"github.com/ctibridge/ctibridge/auth"
)

// conn is one client connection: its reader is a goroutine of the hub
// (run), which ends while the client has nothing to send and the
// connection waits in the hub's poller (park.go); between the hub and the
// socket sits a queue that keeps at most the latest frame per entity,
// written out by the writers or by a flusher goroutine that runs only
// while something is queued (writer.go).
type conn struct {
	// Immutable once run has authenticated the client (before the
	// hub sees the conn).
	h    *Hub
	nc   *lockedConn
	raw  syscall.RawConn // nc's socket when plain TCP: direct writes (direct.go), parking (park.go)
	user *auth.User

	// Owned by the hub goroutine.
	slot int      // index in Hub.clients, -1 when not there
	pbxs []string // the PBXs subscribed to (pbx.go); nil: all the user sees
	base uint64   // changes up to this seq are in what was sent

	// Owned by the reader (one at a time: run, then each turn).
	budget bucket // what the client may still send

	mu      sync.Mutex // guards the fields below
	q       []*frame   // in seq order; nil where a newer frame replaced one
	spare   []*frame   // the flusher's last batch, emptied, for reuse
	live    int        // non-nil entries of q
	idx     map[uint32]int32
	closing []byte // the close frame to send; once non-nil nothing more is queued, empty once sent
	reason  string // why the connection ended (metrics label)
	expiry  *time.Timer
	unwatch func()   // stops the revocation watch (revoke.go)
	rest    [][]byte // what a writer's write left (pieces of shared frames), for the flusher to send first
	sub     *subReq  // the latest subscribe not yet taken by the hub: a ctlSubscribe is on its way
	flushFn func()   // c.flush, for kick
	heard   int64    // hub clock of the last read deadline's extension (extendRead): the client was heard; written by the reader

	flushers sync.WaitGroup // the flusher, waited for by run

	pollID int32    // its id in the poller, owned by the reader (park, finish); 0: not registered
	hdr    [14]byte // the frame header being read (read.go), owned by the reader

	// The small fields, together (a conn is kept per client: its size
	// counts). Immutable once authenticated:
	full        bool // sees everything: admin or operator_panel
	seesUnowned bool // sees trunk, queue and parked calls
	// Owned by the hub goroutine:
	topics       uint8
	subscribed   bool
	deltas       uint8 // the topics that come as what changed (deltaTrunks, deltaQueues)
	statusDeltas bool  // "deltas":["status"]: the node's own say as pbxStatus at the client's seq (unheard.go)
	unheardSnap  bool  // its last snapshot was Unheard (under the unheard epoch)
	// Guarded by mu:
	indexed bool // idx holds q's positions (only for long queues)
	writing bool // a flusher or a direct writer has the connection
	ended   bool // the reader is done: no flusher starts any more
	parked  bool // in the poller, no reader running (park.go)
	// restClose: rest ends with the close frame. Guarded by mu.
	restClose bool
	// Immutable: the writer that writes it (direct.go).
	wid uint8
}

// subReq is a client's subscribe: topics, and where to resume from.
type subReq struct {
	topics       uint8
	pbxs         []string
	since        uint64
	resume       bool
	deltas       uint8 // "deltas":["trunks","queues"]: deltaTrunks, deltaQueues
	statusDeltas bool  // "deltas":["status"]
}

// linearMax: queues up to this long are searched instead of indexed.
const linearMax = 32

// push queues f under c.mu, replacing a queued frame of the same entity
// (it reports whether it did). The replaced frame's slot is left nil and
// f goes to the end, so frames still leave in seq order.
func (c *conn) push(f *frame) (coalesced bool) {
	if f.ent != 0 {
		if i := c.find(f.ent); i >= 0 {
			c.q[i] = nil
			c.live--
			coalesced = true
		}
	}
	c.q = append(c.q, f)
	c.live++
	switch {
	case c.indexed:
		if f.ent != 0 {
			c.idx[f.ent] = int32(len(c.q) - 1)
		}
	case len(c.q) > linearMax:
		c.reindex()
	}
	if len(c.q) > 2*c.live+linearMax {
		c.compact()
	}
	return coalesced
}

func (c *conn) find(ent uint32) int {
	if c.indexed {
		if i, ok := c.idx[ent]; ok {
			return int(i)
		}
		return -1
	}
	for i := len(c.q) - 1; i >= 0; i-- {
		if f := c.q[i]; f != nil && f.ent == ent {
			return i
		}
	}
	return -1
}

func (c *conn) reindex() {
	if c.idx == nil {
		c.idx = make(map[uint32]int32, 4*linearMax)
	}
	clear(c.idx)
	for i, f := range c.q {
		if f != nil && f.ent != 0 {
			c.idx[f.ent] = int32(i)
		}
	}
	c.indexed = true
}

func (c *conn) compact() {
	j := 0
	for _, f := range c.q {
		if f != nil {
			c.q[j] = f
			j++
		}
	}
	clear(c.q[j:])
	c.q = c.q[:j]
	if c.indexed {
		c.reindex()
	}
}

// unindex forgets the positions, under c.mu.
func (c *conn) unindex() {
	if c.indexed {
		clear(c.idx)
		c.indexed = false
	}
}

// dropQueued empties the queue, under c.mu.
func (c *conn) dropQueued() {
	clear(c.q)
	c.q = c.q[:0]
	c.live = 0
	c.unindex()
}

// dropState removes what a new subscription replaces (the snapshot,
// resumed and events queued for the old one) and keeps the replies,
// under c.mu. So a client never has two snapshots queued, however often
// it subscribes.
func (c *conn) dropState() {
	j := 0
	for _, f := range c.q {
		if f != nil && f.kind == frameReply {
			c.q[j] = f
			j++
		}
	}
	clear(c.q[j:])
	c.q = c.q[:j]
	c.live = j
	if c.indexed {
		c.reindex()
	}
}

// pushReply queues a reply from the reader (hello, pong, renewed) and
// starts the flusher.
func (c *conn) pushReply(b []byte, ent uint32) {
	c.mu.Lock()
	if c.closing == nil {
		c.push(&frame{b: b, ent: ent, at: c.h.now(), msgs: 1, kind: frameReply})
		c.kick()
	}
	c.mu.Unlock()
}

// closeWith asks the flusher to send a close frame and stop; flush sends
// what is queued first. The first call wins.
func (c *conn) closeWith(code int, text, reason string, flush bool) {
	c.mu.Lock()
	if c.closing == nil {
		c.closing = closeFrame(code, text)
		c.reason = reason
		if !flush {
			c.dropQueued()
		}
		c.kick()
		if c.parked {
			// A reader waits for the close reply; the flusher shortens
			// this once the close is out.
			c.nc.SetReadDeadline(time.Now().Add(c.h.cfg.SlowTimeout + c.h.cfg.CloseWait))
			c.wake()
		}
	}
	c.mu.Unlock()
}

// fail drops the connection without a close frame (the stream may be in
// the middle of a frame).
func (c *conn) fail(reason string) {
	c.mu.Lock()
	if c.reason == "" {
		c.reason = reason
	}
	if c.closing == nil {
		c.closing = []byte{}
	}
	c.wake() // to clean up
	c.mu.Unlock()
	c.nc.Close()
}

// silenceSlack: a client silent for twice the ping interval plus this is
// dropped (a variable for the tests).
var silenceSlack = 10 * time.Second

// extendRead notes that the client was heard and pushes the read
// deadline out, before the reader reads; only once heardStep has passed
// since it last did (heard is written by the reader alone, so it may read
// it unlocked): a client that sends often costs a lock and a
// SetReadDeadline a step, not a frame.
func (c *conn) extendRead() {
	if now := c.h.now(); now-c.heard >= c.h.heardStep() {
		c.hear(now)
	}
}

// hear notes that the client was heard at now (hub clock) and pushes the
// read deadline out to silentFor from then, unless a close is under way
// (the flusher then sets a short one).
func (c *conn) hear(now int64) {
	c.mu.Lock()
	c.heard = now
	if c.closing == nil {
		c.nc.SetReadDeadline(time.Now().Add(time.Duration(c.h.silentFor())))
	}
	c.mu.Unlock()
}

func (c *conn) setExpiry(exp time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.expiry != nil {
		c.expiry.Stop()
	}
	c.expiry = time.AfterFunc(time.Until(exp), func() {
		c.closeWith(CloseTokenExpired, "token expired", "expired", false)
	})
}
