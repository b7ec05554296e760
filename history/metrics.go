package history

import "github.com/prometheus/client_golang/prometheus"

// NewCollector exposes r's counters (ctibridge_cdr_*), read at scrape
// time.
func NewCollector(r *Recorder) prometheus.Collector { return collector{r} }

type collector struct{ r *Recorder }

// spoolAlarm is the share of the spool's bound (256 MiB) past which
// ctibridge_cdr_spool_full turns 1: CDRs will soon be dropped.
const spoolAlarm = 0.9

var (
	descCdrSeen      = prometheus.NewDesc("ctibridge_cdr_seen_total", "AMI Cdr events read.", nil, nil)
	descCdrSpooled   = prometheus.NewDesc("ctibridge_cdr_spooled_total", "CDRs fsynced to the spool: taken for good.", nil, nil)
	descCdrWritten   = prometheus.NewDesc("ctibridge_cdr_written_total", "CDRs written to the database (a replay after a crash counts again; the database keeps one).", nil, nil)
	descCdrDropped   = prometheus.NewDesc("ctibridge_cdr_dropped_total", "CDRs lost: spool full, disk error, or the disk not keeping up.", nil, nil)
	descCdrRejected  = prometheus.NewDesc("ctibridge_cdr_rejected_total", "CDRs the database refused for their content, set aside in <data-dir>/spool/cdr-rejected.jsonl.", nil, nil)
	descCdrQueued    = prometheus.NewDesc("ctibridge_cdr_queued", "CDRs read and waiting in memory for the spool's fsync.", nil, nil)
	descCdrPending   = prometheus.NewDesc("ctibridge_cdr_pending", "CDRs in the spool, not yet in the database.", nil, nil)
	descSpoolBytes   = prometheus.NewDesc("ctibridge_cdr_spool_bytes", "Bytes of spool not yet in the database.", nil, nil)
	descSpoolMax     = prometheus.NewDesc("ctibridge_cdr_spool_max_bytes", "The spool's bound: past it new CDRs are dropped.", nil, nil)
	descSpoolFull    = prometheus.NewDesc("ctibridge_cdr_spool_full", "1 when the spool is past 90% of its bound: CDRs will soon be dropped.", nil, nil)
	descCdrStoreDown = prometheus.NewDesc("ctibridge_cdr_store_failing", "1 while writing CDRs to the database fails (they wait in the spool).", nil, nil)
)

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descCdrSeen, descCdrSpooled, descCdrWritten, descCdrDropped, descCdrRejected, descCdrQueued, descCdrPending, descSpoolBytes, descSpoolMax, descSpoolFull, descCdrStoreDown} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	counter := func(d *prometheus.Desc, v uint64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	b2f := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	st := c.r.Stats()
	counter(descCdrSeen, st.Seen)
	counter(descCdrSpooled, st.Spooled)
	counter(descCdrWritten, st.Written)
	counter(descCdrDropped, st.Dropped)
	counter(descCdrRejected, st.Rejected)
	gauge(descCdrQueued, float64(st.Queued))
	gauge(descCdrPending, float64(st.Pending))
	gauge(descSpoolBytes, float64(st.SpoolBytes))
	gauge(descSpoolMax, float64(st.SpoolMax))
	gauge(descSpoolFull, b2f(float64(st.SpoolBytes) >= spoolAlarm*float64(st.SpoolMax)))
	gauge(descCdrStoreDown, b2f(st.StoreDown))
}
