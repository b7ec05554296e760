package bus

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/calls"
)

// Config configures a Node.
type Config struct {
	// URL is the NATS server list, comma-separated (nats://host:4222,...).
	URL string
	// PBX names the PBX: its subjects are ctibridge.<PBX>.*, its stream
	// CTIBRIDGE_<PBX>. Letters, digits, '-' and '_'.
	PBX string
	// Node names this node in the lease and the logs. Default host-pid.
	Node string
	// Served is the replica clients read; the node feeds it the stream.
	Served *Replica
	// Primary, on a bridge node, is the replica the link drives while this
	// node leads; it follows the stream until then. Nil on an edge.
	Primary *Replica
	// Lead, on a bridge node, runs the AMI link on Primary until its
	// context ends. It is called once, when this node wins the lease and
	// Primary has caught up with the stream.
	Lead func(ctx context.Context) error
	// Actions, on a bridge node, sends the actions that edges forward
	// while this node leads (the AMI client).
	Actions Doer
	// Refresh, on a bridge node, is the link's Refresh, asked by edges
	// after an action that changes AstDB.
	Refresh func(actions ...ami.Message) bool
	// Fingerprint names the engine configuration (EngineFingerprint): a
	// node refuses a stream led with another one (it would not replay it
	// to the same state).
	Fingerprint string
	// LinkPBX, on a bridge node, is the wrapper of the AMI client that Lead's
	// link reads (NewLinkPBX): it lets the node roll the op log over. Nil: no
	// rollover (the log grows until purged by hand; tests).
	LinkPBX *LinkPBX
	// RollBytes and RollAge: the leader starts a new generation of the op
	// log when the stream holds more bytes or its generation is older
	// (rollover.go). Default DefaultRollBytes and DefaultRollAge; negative
	// disables. RollCheck is how often it looks; default DefaultRollCheck,
	// or RollAge/10 when shorter (100 ms at least).
	RollBytes int64
	RollAge   time.Duration
	RollCheck time.Duration
	// Prefer, on a bridge node, makes it the PBX's preferred leader: while
	// it stands by, a leader that is not preferred hands the lead over to
	// it (handover.go). Several nodes may prefer a PBX: whichever leads
	// keeps it.
	Prefer bool
	// Reachable, on a bridge node, says whether it could lead: whether
	// it logs in to the PBX (cmd/ctibridge: ami.Probe with its AMI
	// credentials). A preferred node that does not asks for no handover
	// (nil: it asks); a standby answers a leader whose link is down
	// (YieldAfter) with it (nil: it declines).
	Reachable func(ctx context.Context) error
	// YieldAfter: a leader whose AMI link has been down continuously
	// for this long asks the standbys whether they log in, hands the
	// lead over to one that does, and asks again YieldAfter after
	// each refusal (yield.go). Default DefaultYieldAfter; negative
	// disables.
	YieldAfter time.Duration
	// LeaseTTL is how long a lease not renewed stays with its holder.
	// Default DefaultLeaseTTL; renewed every LeaseTTL/3.
	LeaseTTL time.Duration
	// Log receives lifecycle messages. Default: discard.
	Log *slog.Logger
	// Dialer, when set, makes the node's NATS connections (tests cut a
	// node off from NATS with it). Default: nats.go's own.
	Dialer nats.CustomDialer

	// beforeApply, set by tests, is called with each stream message's
	// seq before it is applied (a slow node, held back).
	beforeApply func(seq uint64)
}

// Doer sends an AMI action and waits for its response; *ami.Client
// satisfies it, and so does the Node (it forwards to the leader).
type Doer interface {
	Do(ctx context.Context, a ami.Message) (ami.Response, error)
}

// ErrDeposed is Run's error when this node led and lost the lease or a
// publish was fenced off: its primary engine may hold ops nobody else has,
// so the node is not run again; a new Node (with a fresh primary) may
// contend again (cmd/ctibridge stands by so, per PBX).
var ErrDeposed = errors.New("bus: this node lost the lead of its PBX")

// ErrGap: the stream delivered a message other than a genesis after a hole
// in its seqs. What the node serves would lack the missing ops, so it
// applies nothing more and Run returns the error: started again, the node
// reads the stream from its genesis.
var ErrGap = errors.New("bus: the op stream skipped seqs")

var pbxName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Node is one ctibridge node on the bus: it follows the PBX's op stream
// into Served and, on a bridge node, contends for the lease and leads.
type Node struct {
	cfg     Config
	log     *slog.Logger
	nc      *nats.Conn
	js      jetstream.JetStream
	stream  jetstream.Stream
	subject string
	epoch   string
	key     [32]byte

	leading atomic.Bool
	// fenced: this node stepped down when its lease ran out (fence.go);
	// fencedAt when, Unix ns.
	fenced   atomic.Bool
	fencedAt atomic.Int64
	ready    atomic.Bool
	cutOff   atomic.Bool // neither the lease nor the stream heard for LeaseTTL
	unheard  unheard     // the node says it cannot hear its stream (unheard.go)
	pulse    pulse       // what it heard of the leader's heartbeat (beat.go)
	// reconnected: the NATS connection came back, restart the consumer.
	reconnected chan struct{}
	consumer    atomic.Pointer[jetstream.Consumer] // the current one (tests: where it is)
	applied     atomic.Uint64                      // last stream seq applied to Served
	pubMu       sync.Mutex                         // a leader's publishes: its link's and its restores
	pubSeq      uint64                             // last seq this leader published
	pubCount    uint64
	// pubTerm is the stream seq this node took the lead at: with the node
	// name it makes the message ids of its publishes unique per leadership
	// term, so a restarted node of the same name is not answered by the
	// duplicate window with its former self's messages.
	pubTerm  uint64
	midLink  bool            // a chunk published since the last batch's end changes the link
	lastLink calls.LinkState // the link state of the last batch published
	// downSince: since when the state this leader publishes says the
	// link is down (zero when it does not); from lead's start, as the
	// link is not up yet (yield.go). pubMu held.
	downSince time.Time
	// restorePending: a stall marker came while midLink; restore after
	// the batch's end.
	restorePending bool
	stalls         chan struct{} // a stall marker applied while leading
	deposed        chan error
	ctx            context.Context // Run's, set before any goroutine starts
	gen            generation
	m              counters
	bg             sync.WaitGroup // Run's goroutines started from elsewhere (purges)

	lease *lease // Run's, on a bridge node
	// handMu orders flush and stepDown (handover.go): chunkAt, when a
	// chunk of a batch not ended went out (zero at a batch's end), is
	// read at a safe point.
	handMu  sync.Mutex
	chunkAt time.Time
	// handedOff: this leader stepped down to hand over, it publishes
	// nothing more. pubMu held.
	handedOff         bool
	warnedPreferred   bool // the lease's goroutine's
	warnedUnreachable bool // the lease's goroutine's
	// probeFails counts a preferred node's failed Reachable probes in a
	// row, probeAgain is when it may probe again (the lease's goroutine's).
	probeFails int
	probeAgain time.Time
}

// Open connects to NATS, creates the PBX's stream and buckets if they do
// not exist, and reads (or writes, the first node to come) the stream's
// genesis and the shared opaque-name key.
func Open(ctx context.Context, cfg Config) (*Node, error) {
	if err := CheckName(cfg.PBX); err != nil {
		return nil, err
	}
	if cfg.Served == nil || (cfg.Primary != nil) != (cfg.Lead != nil) {
		return nil, errors.New("bus: Served is required, and Primary and Lead go together")
	}
	if cfg.Node == "" {
		h, _ := os.Hostname()
		cfg.Node = h + "-" + strconv.Itoa(os.Getpid())
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = DefaultLeaseTTL
	}
	if cfg.YieldAfter == 0 {
		cfg.YieldAfter = DefaultYieldAfter
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if err := checkRollConfig(&cfg); err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, log: cfg.Log.With("component", "bus", "pbx", cfg.PBX), subject: "ctibridge." + cfg.PBX + ".ops",
		deposed: make(chan error, 1), stalls: make(chan struct{}, 1), reconnected: make(chan struct{}, 1)}
	opts := []nats.Option{nats.Name("ctibridge " + cfg.Node), nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond), nats.Timeout(2 * time.Second),
		nats.DisconnectErrHandler(n.disconnected), nats.ReconnectHandler(n.reconnect)}
	if cfg.Dialer != nil {
		opts = append(opts, nats.SetCustomDialer(cfg.Dialer))
	}
	nc, err := nats.Connect(cfg.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("bus: connect %s: %w", cfg.URL, err)
	}
	n.nc = nc
	if cfg.LinkPBX != nil {
		arm := n.armRollover
		cfg.LinkPBX.arm.Store(&arm)
	}
	if err := n.setup(ctx); err != nil {
		nc.Close()
		return nil, err
	}
	return n, nil
}

// setup makes sure the stream, its genesis and the key exist.
func (n *Node) setup(ctx context.Context) (err error) {
	if n.js, err = jetstream.New(n.nc); err != nil {
		return err
	}
	name := StreamName(n.cfg.PBX)
	scfg := jetstream.StreamConfig{Name: name, Subjects: []string{n.subject}, Storage: jetstream.FileStorage,
		Replicas: 3, Duplicates: 2 * time.Minute}
	n.stream, err = retried(ctx, func(ctx context.Context) (jetstream.Stream, error) {
		s, err := n.js.CreateOrUpdateStream(ctx, scfg)
		if err != nil && scfg.Replicas > 1 && isNoReplicas(err) {
			n.log.Info("fewer than 3 JetStream servers: the op stream has one replica", "err", err)
			scfg.Replicas = 1
			s, err = n.js.CreateOrUpdateStream(ctx, scfg)
		}
		return s, err
	})
	if err != nil {
		return fmt.Errorf("bus: stream %s: %w", name, err)
	}
	if n.epoch, err = n.genesis(ctx); err != nil {
		return err
	}
	if n.key, err = n.sharedKey(ctx, scfg.Replicas); err != nil {
		return err
	}
	return nil
}

func isNoReplicas(err error) bool {
	s := err.Error()
	return strings.Contains(s, "insufficient resources") || strings.Contains(s, "replicas > 1 not supported")
}

// retried calls f until it succeeds or 15 s pass: a cluster that just
// started (or lost a server) elects its JetStream leaders first. For
// Open's setup only: a running node never gives up on NATS (retry).
func retried[T any](ctx context.Context, f func(ctx context.Context) (T, error)) (T, error) {
	return retry(ctx, time.Now().Add(15*time.Second), nil, f)
}

// Between retry's calls: minBackoff, doubled after each failure up to
// maxBackoff.
const (
	minBackoff = 200 * time.Millisecond
	maxBackoff = 5 * time.Second
)

// retry calls f, each call for 3 s at most, until it succeeds, ctx ends
// or, deadline not zero, the deadline passes. Between calls it waits
// minBackoff while there is a deadline (a startup's election is short),
// a backoff up to maxBackoff when there is none, cut short when wake
// fires (the NATS connection is back).
func retry[T any](ctx context.Context, deadline time.Time, wake <-chan struct{}, f func(ctx context.Context) (T, error)) (T, error) {
	wait, most := minBackoff, maxBackoff
	if !deadline.IsZero() {
		most = minBackoff
	}
	for {
		c, cancel := context.WithTimeout(ctx, 3*time.Second)
		v, err := f(c)
		cancel()
		if err == nil || !deadline.IsZero() && time.Now().After(deadline) || ctx.Err() != nil {
			return v, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-wake:
		case <-t.C:
		}
		t.Stop()
		wait = min(2*wait, most)
	}
}

// genesis returns the stream's epoch (its genesis id), writing the
// first genesis when the stream holds no message (only one writer can:
// it expects the stream's last seq). The stream's first message is the
// current generation's genesis: older ones are purged (rollover.go).
func (n *Node) genesis(ctx context.Context) (string, error) {
	var id [8]byte
	rand.Read(id[:])
	g := genesis{ID: hex.EncodeToString(id[:]), Created: time.Now().UnixMilli(), Gen: 1}
	raw, err := retried(ctx, func(ctx context.Context) (*jetstream.RawStreamMsg, error) {
		info, err := n.stream.Info(ctx)
		if err != nil {
			return nil, err
		}
		if info.State.Msgs == 0 {
			// New, or purged whole by hand: a first generation.
			_, err := n.js.Publish(ctx, n.subject, g.encode(), jetstream.WithExpectLastSequence(info.State.LastSeq))
			if err != nil && !isWrongSeq(err) {
				return nil, fmt.Errorf("write genesis: %w", err)
			}
			if info, err = n.stream.Info(ctx); err != nil {
				return nil, err
			}
		}
		// A rollover's purge may drop it meanwhile: read it again then.
		return n.stream.GetMsg(ctx, info.State.FirstSeq)
	})
	if err != nil {
		return "", fmt.Errorf("bus: read genesis: %w", err)
	}
	kind, got, _, err := decodeControl(raw.Data)
	if err != nil || kind != kindGenesis {
		return "", fmt.Errorf("bus: stream %s does not start with a genesis (kind %d, %v): not a ctibridge stream of this version", n.stream.CachedInfo().Config.Name, kind, err)
	}
	return got.ID, nil
}

func isWrongSeq(err error) bool {
	var ae *jetstream.APIError
	return errors.As(err, &ae) && (ae.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || ae.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// sharedKey is the key of auth's opaque channel names, the same on every
// node (bucket ctibridge_keys, key "opaque"): ids match across edges.
func (n *Node) sharedKey(ctx context.Context, replicas int) (k [32]byte, err error) {
	kv, err := n.bucket(ctx, "ctibridge_keys", replicas)
	if err != nil {
		return k, err
	}
	rand.Read(k[:])
	e, err := retried(ctx, func(ctx context.Context) (jetstream.KeyValueEntry, error) {
		if _, err := kv.Create(ctx, "opaque", k[:]); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
			return nil, err
		}
		return kv.Get(ctx, "opaque")
	})
	if err != nil {
		return k, fmt.Errorf("bus: the opaque-name key in ctibridge_keys: %w", err)
	}
	if len(e.Value()) != len(k) {
		return k, fmt.Errorf("bus: the opaque-name key in ctibridge_keys is %d bytes, want %d", len(e.Value()), len(k))
	}
	copy(k[:], e.Value())
	return k, nil
}

func (n *Node) bucket(ctx context.Context, name string, replicas int) (jetstream.KeyValue, error) {
	kv, err := retried(ctx, func(ctx context.Context) (jetstream.KeyValue, error) {
		kv, err := n.js.KeyValue(ctx, name)
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			kv, err = n.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: name, Replicas: replicas, Storage: jetstream.FileStorage})
			if errors.Is(err, jetstream.ErrBucketExists) {
				kv, err = n.js.KeyValue(ctx, name)
			}
		}
		return kv, err
	})
	if err != nil {
		return nil, fmt.Errorf("bus: bucket %s: %w", name, err)
	}
	return kv, nil
}

// Epoch names the stream's generation: every node serves the same seqs
// under it (the WebSocket epoch).
func (n *Node) Epoch() string { return n.epoch }

// OpaqueKey is the shared key of auth's opaque channel names.
func (n *Node) OpaqueKey() [32]byte { return n.key }

// Ready reports whether the node follows the stream (or leads), hears
// from NATS and its stream (unheard.go), has not stepped down for a
// lease that ran out (fence.go), and the state it serves is live, or stale only while a new
// generation of the log is built, for 30 s at most (every node is then
// stale: rollover.go).
func (n *Node) Ready() bool {
	return n.ready.Load() && !n.cutOff.Load() && !n.fenced.Load() && !n.Unheard() && (!n.cfg.Served.Engine().Snapshot().Stale || n.cfg.Served.building())
}

// Leading reports whether this node holds the PBX link.
func (n *Node) Leading() bool { return n.leading.Load() }

// Close closes the NATS connection. Call it after Run has returned.
func (n *Node) Close() { n.nc.Close() }

// StreamName is the name of PBX pbx's stream, CTIBRIDGE_<PBX>: upper
// case, '-' becoming '_', so two PBX names may share one.
func StreamName(pbx string) string {
	return "CTIBRIDGE_" + strings.ToUpper(strings.ReplaceAll(pbx, "-", "_"))
}

// CheckName says why a PBX name cannot name a stream, or nil.
func CheckName(pbx string) error {
	if !pbxName.MatchString(pbx) {
		return fmt.Errorf("bus: PBX name %q: letters, digits, '-' and '_' only, 1 to 64", pbx)
	}
	return nil
}
