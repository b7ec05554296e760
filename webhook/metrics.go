package webhook

import "github.com/prometheus/client_golang/prometheus"

var (
	descDelivered = prometheus.NewDesc("ctibridge_webhook_delivered_total", "Events the webhook's receiver took (2xx).", []string{"webhook"}, nil)
	descFailed    = prometheus.NewDesc("ctibridge_webhook_failed_total", "Delivery attempts that failed (transport error, timeout, 5xx, 408, 425, 429); each is retried.", []string{"webhook"}, nil)
	descDropped   = prometheus.NewDesc("ctibridge_webhook_dropped_total", "Events lost: queue full, disk error, or refused by the receiver with another 4xx.", []string{"webhook"}, nil)
	descQueued    = prometheus.NewDesc("ctibridge_webhook_queued", "Events waiting for delivery, in memory and on disk.", []string{"webhook"}, nil)
	descFeedGaps  = prometheus.NewDesc("ctibridge_webhook_feed_resyncs_total", "Times the webhook feed reader fell behind the engine's feed and resynchronised from a snapshot.", nil, nil)
	descFeedGens  = prometheus.NewDesc("ctibridge_webhook_feed_generations_total", "Times the engine's feed jumped to a new generation (a bus rollover) and the webhook feed reader replayed its changes.", nil, nil)
	descHeldDrop  = prometheus.NewDesc("ctibridge_webhook_held_dropped_total", "Call events a node not sending its PBX's events held for a takeover and dropped, the oldest, past the hold's bound (10000 a PBX).", nil, nil)
)

// Collector returns a prometheus.Collector of the webhooks' counters.
func (s *Service) Collector() prometheus.Collector { return collector{s} }

type collector struct{ s *Service }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descDelivered, descFailed, descDropped, descQueued, descFeedGaps, descFeedGens, descHeldDrop} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	for _, st := range c.s.Stats() {
		ch <- prometheus.MustNewConstMetric(descDelivered, prometheus.CounterValue, float64(st.Delivered), st.Name)
		ch <- prometheus.MustNewConstMetric(descFailed, prometheus.CounterValue, float64(st.Failed), st.Name)
		ch <- prometheus.MustNewConstMetric(descDropped, prometheus.CounterValue, float64(st.Dropped), st.Name)
		ch <- prometheus.MustNewConstMetric(descQueued, prometheus.GaugeValue, float64(st.Queued), st.Name)
	}
	ch <- prometheus.MustNewConstMetric(descFeedGaps, prometheus.CounterValue, float64(c.s.resyncs.Load()))
	ch <- prometheus.MustNewConstMetric(descFeedGens, prometheus.CounterValue, float64(c.s.generations.Load()))
	ch <- prometheus.MustNewConstMetric(descHeldDrop, prometheus.CounterValue, float64(c.s.heldDropped.Load()))
}
