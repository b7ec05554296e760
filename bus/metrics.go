package bus

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// counters are the node's figures for /metrics (NewCollector), updated
// with atomics on the paths they count; the collector reads them at
// scrape time.
type counters struct {
	published      atomic.Uint64 // messages this node stored as leader (ops, lead, genesis)
	publishedBytes atomic.Uint64
	applied        atomic.Uint64 // stream messages applied to Served
	appliedBytes   atomic.Uint64
	retries        atomic.Uint64 // publishes tried again (no ack)
	consRetries    atomic.Uint64 // consumers of the stream asked for again (run.go, consume)
	adopted        atomic.Uint64 // stall markers a fenced publish adopted
	takeovers      atomic.Uint64 // times this node took the lead
	stallsWritten  atomic.Uint64
	stallsApplied  atomic.Uint64
	dropped        atomic.Uint64 // ops too large for a message, dropped
	unheard        atomic.Uint64 // times the node said it cannot hear its stream (unheard.go)
	late           atomic.Uint64 // times the leader's heartbeat was found late (beat.go)
	beatsSent      atomic.Uint64 // heartbeats this node sent as leader
	handovers      atomic.Uint64 // leads handed over: to a preferred node, or yielded (yield.go)
	leaderChecks   atomic.Uint64 // stream-info requests for the lease bucket's leader (lease.go)
	fenceRefused   atomic.Uint64 // actions refused with ErrStaleLease (fence.go)
	streamLast     atomic.Uint64 // the stream's last seq, as last read
	streamMsgs     atomic.Uint64 // the stream's messages and bytes: the current generation's once purged
	streamBytes    atomic.Uint64
}

// Stats is a node's figures (what /metrics shows).
type Stats struct {
	Role            string // "leader", "standby" (a bridge not leading) or "edge"
	Published       uint64 // messages stored as leader, and their bytes
	PublishedBytes  uint64
	Applied         uint64 // stream messages applied, and their bytes
	AppliedBytes    uint64
	AppliedSeq      uint64 // last stream seq applied
	StreamSeq       uint64 // the stream's last seq when last read (every second)
	Retries         uint64 // publishes tried again after no ack
	ConsumerRetries uint64 // consumers of the stream asked for again (NATS out of reach)
	Adopted         uint64 // stall markers adopted by a fenced publish
	Takeovers       uint64 // leads taken by this node
	StallsWritten   uint64 // stall markers this node stored
	StallsApplied   uint64 // stall markers applied
	Generation      uint64 // the current generation of the op log
	GenerationSeq   uint64 // the stream seq of its genesis
	GenerationMsgs  uint64 // the stream's messages and bytes (the generation's once the old one is purged)
	GenerationBytes uint64
	Rollovers       uint64 // new generations this node started as leader
	Dropped         uint64 // ops larger than the servers' max_payload, dropped as leader
	Unheard         bool   // the node says it cannot hear its stream (unheard.go)
	UnheardTimes    uint64 // times it went so
	LeaderLate      uint64 // times the leader's heartbeat was found late (beat.go)
	BeatsSent       uint64 // heartbeats sent as leader
	Handovers       uint64 // leads handed over: to a preferred node, or yielded (yield.go)
	LeaderChecks    uint64 // stream-info requests for the lease bucket's JetStream leader
	LeaseExpired    bool   // the node stepped down when its lease ran out unrenewed (fence.go)
	StaleRefused    uint64 // actions refused with ErrStaleLease, nothing sent to the PBX
}

// Stats returns the node's figures. Any goroutine.
func (n *Node) Stats() Stats {
	g, seq := n.gen.get()
	role := "edge"
	switch {
	case n.leading.Load():
		role = "leader"
	case n.cfg.Primary != nil:
		role = "standby"
	}
	c := &n.m
	return Stats{Role: role, Published: c.published.Load(), PublishedBytes: c.publishedBytes.Load(),
		Applied: c.applied.Load(), AppliedBytes: c.appliedBytes.Load(), AppliedSeq: n.applied.Load(), StreamSeq: c.streamLast.Load(),
		Retries: c.retries.Load(), ConsumerRetries: c.consRetries.Load(), Adopted: c.adopted.Load(), Takeovers: c.takeovers.Load(),
		StallsWritten: c.stallsWritten.Load(), StallsApplied: c.stallsApplied.Load(),
		Generation: g.Gen, GenerationSeq: seq, GenerationMsgs: c.streamMsgs.Load(), GenerationBytes: c.streamBytes.Load(),
		Rollovers: n.gen.rolls.Load(), Dropped: c.dropped.Load(), Unheard: n.Unheard(), UnheardTimes: c.unheard.Load(),
		LeaderLate: c.late.Load(), BeatsSent: c.beatsSent.Load(), Handovers: c.handovers.Load(), LeaderChecks: c.leaderChecks.Load(),
		LeaseExpired: n.fenced.Load(), StaleRefused: c.fenceRefused.Load()}
}

type collector struct{ n *Node }

// NewCollector returns a Prometheus collector of the node's figures
// (docs/operations.md lists them).
func NewCollector(n *Node) prometheus.Collector { return collector{n} }

var (
	descRole      = prometheus.NewDesc("ctibridge_bus_role", "1 for this node's role on the bus: leader (holds the PBX link), standby (a bridge following), edge.", []string{"role"}, nil)
	descPublished = prometheus.NewDesc("ctibridge_bus_published_messages_total", "Op stream messages this node stored as leader (ops, lead records, genesis).", nil, nil)
	descPubBytes  = prometheus.NewDesc("ctibridge_bus_published_bytes_total", "Bytes of the op stream messages this node stored as leader.", nil, nil)
	descApplied   = prometheus.NewDesc("ctibridge_bus_applied_messages_total", "Op stream messages applied to the state this node serves.", nil, nil)
	descAppBytes  = prometheus.NewDesc("ctibridge_bus_applied_bytes_total", "Bytes of the op stream messages applied.", nil, nil)
	descLagMsgs   = prometheus.NewDesc("ctibridge_bus_replay_lag_messages", "The stream's last seq (read every second) minus the last seq applied.", nil, nil)
	descRetries   = prometheus.NewDesc("ctibridge_bus_publish_retries_total", "Publishes tried again after no acknowledgement (NATS out of reach, a JetStream election).", nil, nil)
	descConsRetry = prometheus.NewDesc("ctibridge_bus_consumer_retries_total", "Consumers of the op stream this node asked for again after one could not be made (NATS out of reach, the stream without a JetStream leader): the node stays unheard meanwhile and never gives up.", nil, nil)
	descAdopted   = prometheus.NewDesc("ctibridge_bus_stall_markers_adopted_total", "Stall markers a fenced publish of this leader found after its last seq and went on after.", nil, nil)
	descTakeovers = prometheus.NewDesc("ctibridge_bus_takeovers_total", "Times this node took the lead of the PBX.", nil, nil)
	descStallsW   = prometheus.NewDesc("ctibridge_bus_stall_markers_written_total", "Stall markers this node stored (the leader silent for half the lease TTL).", nil, nil)
	descStallsA   = prometheus.NewDesc("ctibridge_bus_stall_markers_applied_total", "Stall markers applied (the state shown stalled).", nil, nil)
	descGen       = prometheus.NewDesc("ctibridge_bus_generation", "The current generation of the op log.", nil, nil)
	descGenMsgs   = prometheus.NewDesc("ctibridge_bus_stream_messages", "Messages in the op stream (the current generation's once the old one is purged).", nil, nil)
	descGenBytes  = prometheus.NewDesc("ctibridge_bus_stream_bytes", "Bytes in the op stream (the current generation's once the old one is purged).", nil, nil)
	descRollovers = prometheus.NewDesc("ctibridge_bus_rollovers_total", "New generations of the op log this node started as leader.", nil, nil)
	descUnheard   = prometheus.NewDesc("ctibridge_bus_unheard", "1 while this node cannot hear its op stream (its NATS connection down, the stream's info unreadable, or its consumer silent with the stream ahead) or the leader's heartbeat is late: its clients are told the state is stale.", nil, nil)
	descUnheardT  = prometheus.NewDesc("ctibridge_bus_unheard_total", "Times this node went unable to hear its op stream.", nil, nil)
	descLate      = prometheus.NewDesc("ctibridge_bus_leader_late_total", "Times this node found the leader's heartbeat late (none for a quarter of the lease TTL, or a seq it announced not applied that long after): its clients are told the state is stale until a beat's seq is applied.", nil, nil)
	descBeats     = prometheus.NewDesc("ctibridge_bus_heartbeats_sent_total", "Heartbeats this node sent as leader (every twelfth of the lease TTL while its publishes go through).", nil, nil)
	descHandovers = prometheus.NewDesc("ctibridge_bus_handovers_total", "Leads this node handed over to a preferred node (--bus-prefer) or yielded to a standby that logs in while its own link was down.", nil, nil)
	descChecks    = prometheus.NewDesc("ctibridge_bus_lease_leader_checks_total", "Stream-info requests for the lease bucket's JetStream leader, made by a standby when the lease stood still for half its TTL.", nil, nil)
	descExpired   = prometheus.NewDesc("ctibridge_bus_lease_expired", "1 once this bridge's candidate stepped down because its lease ran out unrenewed (cut off from NATS): it acts on the PBX no more, a new one stands by.", nil, nil)
	descStaleRef  = prometheus.NewDesc("ctibridge_bus_stale_lease_refused_total", "Actions refused because this node's lease was stale (503 lease_stale): nothing was sent to the PBX.", nil, nil)
	descDropped   = prometheus.NewDesc("ctibridge_bus_dropped_ops_total", "Ops larger than the NATS max_payload this node dropped as leader (an AMI frame or a follow-up's answer item): the state may miss them until a reconcile or resync.", nil, nil)
)

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRole, descPublished, descPubBytes, descApplied, descAppBytes, descLagMsgs, descRetries, descConsRetry,
		descAdopted, descTakeovers, descStallsW, descStallsA, descGen, descGenMsgs, descGenBytes, descRollovers, descDropped,
		descUnheard, descUnheardT, descLate, descBeats, descHandovers, descChecks, descExpired, descStaleRef} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	s := c.n.Stats()
	gauge := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labels...)
	}
	counter := func(d *prometheus.Desc, v uint64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	for _, r := range []string{"leader", "standby", "edge"} {
		v := uint64(0)
		if r == s.Role {
			v = 1
		}
		gauge(descRole, v, r)
	}
	counter(descPublished, s.Published)
	counter(descPubBytes, s.PublishedBytes)
	counter(descApplied, s.Applied)
	counter(descAppBytes, s.AppliedBytes)
	gauge(descLagMsgs, s.StreamSeq-min(s.StreamSeq, s.AppliedSeq))
	counter(descRetries, s.Retries)
	counter(descConsRetry, s.ConsumerRetries)
	counter(descAdopted, s.Adopted)
	counter(descTakeovers, s.Takeovers)
	counter(descStallsW, s.StallsWritten)
	counter(descStallsA, s.StallsApplied)
	gauge(descGen, s.Generation)
	gauge(descGenMsgs, s.GenerationMsgs)
	gauge(descGenBytes, s.GenerationBytes)
	counter(descRollovers, s.Rollovers)
	counter(descDropped, s.Dropped)
	unheard := uint64(0)
	if s.Unheard {
		unheard = 1
	}
	gauge(descUnheard, unheard)
	counter(descUnheardT, s.UnheardTimes)
	counter(descLate, s.LeaderLate)
	counter(descBeats, s.BeatsSent)
	counter(descHandovers, s.Handovers)
	counter(descChecks, s.LeaderChecks)
	expired := uint64(0)
	if s.LeaseExpired {
		expired = 1
	}
	gauge(descExpired, expired)
	counter(descStaleRef, s.StaleRefused)
}
