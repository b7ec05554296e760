package link

import (
	"sort"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ctibridge/ctibridge/ami"
)

// ClientStats is what the collector reads from the AMI client;
// *ami.Client satisfies it.
type ClientStats interface {
	Connected() bool
	Stats() ami.ClientStats
}

// collector exposes the link's, the engine's and the AMI client's counters
// to Prometheus. It reads them at scrape time, so the hot paths pay nothing.
type collector struct {
	link   *Link
	client ClientStats
}

// NewCollector returns a Prometheus collector for l and its client.
func NewCollector(l *Link, client ClientStats) prometheus.Collector {
	return collector{l, client}
}

var (
	descConnected  = prometheus.NewDesc("ctibridge_ami_connected", "1 when the AMI connection is up and logged in.", nil, nil)
	descReady      = prometheus.NewDesc("ctibridge_ready", "1 when the PBX link is up and the state resynchronised (what /readyz answers).", nil, nil)
	descConnects   = prometheus.NewDesc("ctibridge_ami_connects_total", "Successful AMI logins.", nil, nil)
	descReconnects = prometheus.NewDesc("ctibridge_ami_reconnects_total", "Successful AMI logins after the first.", nil, nil)
	descFailures   = prometheus.NewDesc("ctibridge_ami_connect_failures_total", "AMI connection attempts that did not log in.", nil, nil)
	descOverflows  = prometheus.NewDesc("ctibridge_ami_overflows_total", "AMI connections dropped because the event queue overflowed.", nil, nil)
	descPingFails  = prometheus.NewDesc("ctibridge_ami_ping_failures_total", "AMI connections dropped because a keep-alive Ping went unanswered (or nothing was read within the idle deadline).", nil, nil)
	descPingLate   = prometheus.NewDesc("ctibridge_ami_ping_late_total", "Keep-alive Pings not answered within the late threshold: the state was marked stale.", nil, nil)
	descPingRTT    = prometheus.NewDesc("ctibridge_ami_ping_rtt_seconds", "Round trip of the last answered keep-alive Ping.", nil, nil)
	descHeaderless = prometheus.NewDesc("ctibridge_ami_headerless_frames_total", "AMI frames with neither Event nor Response, dropped.", nil, nil)
	descMessages   = prometheus.NewDesc("ctibridge_ami_messages_total", "AMI frames read.", nil, nil)
	descGarbage    = prometheus.NewDesc("ctibridge_ami_garbage_lines_total", "AMI lines skipped because they were not headers.", nil, nil)
	descOversized  = prometheus.NewDesc("ctibridge_ami_oversized_frames_total", "AMI connections dropped for a line or frame over the size limits.", nil, nil)
	descEvents     = prometheus.NewDesc("ctibridge_events_total", "AMI messages applied to the engine, by event name.", []string{"event"}, nil)
	descUnknown    = prometheus.NewDesc("ctibridge_events_out_of_order_total", "Events for unknown channels or out of order, tolerated.", nil, nil)
	descDrift      = prometheus.NewDesc("ctibridge_drift_repairs_total", "Corrections made by the periodic drift check: events missed on a live link.", nil, nil)
	descLoads      = prometheus.NewDesc("ctibridge_resync_loads_total", "State loaded or corrected by resynchronisations (at a connection, after a PBX restart).", nil, nil)
	descResyncs    = prometheus.NewDesc("ctibridge_resyncs_total", "Completed resynchronisations from the PBX's lists.", nil, nil)
	descResyncFail = prometheus.NewDesc("ctibridge_resync_failures_total", "Resynchronisations abandoned (timeout, link lost).", nil, nil)
	descResyncTime = prometheus.NewDesc("ctibridge_resync_seconds", "Duration of the last resynchronisation.", nil, nil)
	descReconciles = prometheus.NewDesc("ctibridge_reconciles_total", "Drift checks against CoreShowChannels.", nil, nil)
	descLag        = prometheus.NewDesc("ctibridge_engine_batch_seconds", "Time the engine took to apply and publish the last batch of events.", nil, nil)
	descEngineTime = prometheus.NewDesc("ctibridge_engine_seconds_total", "Time the engine spent applying events (step=apply) and publishing batches (step=publish, with the follow-ups it asks for).", []string{"step"}, nil)
	descBatches    = prometheus.NewDesc("ctibridge_engine_batches_total", "Batches of events applied and published.", nil, nil)
	descFollowups  = prometheus.NewDesc("ctibridge_followups_total", "Follow-up actions answered (endpoint details, AstDB, mailbox counts, parking lots).", nil, nil)
	descBadValues  = prometheus.NewDesc("ctibridge_astdb_bad_values_total", "AstDB values refused: a forward target with letters or CR/LF, a bad DND value or name.", nil, nil)
)

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descConnected, descReady, descConnects, descReconnects, descFailures,
		descOverflows, descPingFails, descPingLate, descPingRTT, descHeaderless, descMessages, descGarbage, descOversized, descEvents, descUnknown,
		descDrift, descLoads, descResyncs, descResyncFail, descResyncTime, descReconciles, descLag, descEngineTime, descBatches, descFollowups, descBadValues} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	b2f := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	cs := c.client.Stats()
	ls := c.link.Stats()
	gauge(descConnected, b2f(c.client.Connected()))
	gauge(descReady, b2f(ls.Ready))
	counter(descConnects, cs.Connects)
	counter(descReconnects, cs.Reconnects)
	counter(descFailures, cs.Failures)
	counter(descOverflows, cs.Overflows)
	counter(descPingFails, cs.PingFails)
	counter(descPingLate, cs.LatePings)
	gauge(descPingRTT, cs.PingRTT.Seconds())
	counter(descHeaderless, cs.Headerless)
	counter(descMessages, cs.Messages)
	counter(descGarbage, cs.Garbage)
	counter(descOversized, cs.Oversized)
	names := make([]string, 0, len(ls.Engine.ByType))
	for n := range ls.Engine.ByType {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		counter(descEvents, ls.Engine.ByType[n], n)
	}
	counter(descUnknown, ls.Engine.Unknown)
	counter(descDrift, ls.Engine.DriftRepairs)
	counter(descLoads, ls.Engine.ResyncLoads)
	counter(descResyncs, ls.Resyncs)
	counter(descResyncFail, ls.ResyncFailures)
	gauge(descResyncTime, ls.LastResync.Seconds())
	counter(descReconciles, ls.Reconciles)
	gauge(descLag, ls.BatchLag.Seconds())
	ch <- prometheus.MustNewConstMetric(descEngineTime, prometheus.CounterValue, ls.ApplyTime.Seconds(), "apply")
	ch <- prometheus.MustNewConstMetric(descEngineTime, prometheus.CounterValue, ls.PublishTime.Seconds(), "publish")
	counter(descBatches, ls.Batches)
	counter(descFollowups, ls.Followups)
	counter(descBadValues, ls.Engine.BadValues)
}
