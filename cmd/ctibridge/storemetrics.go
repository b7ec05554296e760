package main

import (
	"github.com/prometheus/client_golang/prometheus"
)

// storeCollector exposes the database's state, read at scrape time; the
// CDR recorder's counters are history.NewCollector's.
type storeCollector struct{ s *stores }

var descStoreUp = prometheus.NewDesc("ctibridge_store_up", "1 when the phonebook and history database is connected and migrated and answered its last check; 0 while it is down or not yet reached (history and phonebook answer 503, CDRs wait in the spool).", nil, nil)

func (c storeCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descStoreUp }

func (c storeCollector) Collect(ch chan<- prometheus.Metric) {
	if c.s.gate != nil {
		up := 0.0
		if c.s.gate.Up() {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(descStoreUp, prometheus.GaugeValue, up)
	}
}
