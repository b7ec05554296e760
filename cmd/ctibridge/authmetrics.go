package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ctibridge/ctibridge/auth"
)

// authCollector exposes the login limits' view and the shared session
// table's, read at scrape time.
type authCollector struct{ a *auth.Service }

var (
	descUnderAttack = prometheus.NewDesc("ctibridge_login_names_under_attack", "User names that failed to log in more than the free number of times recently (10 by default): their unknown addresses share one growing delay.", nil, nil)
	descOverBudget  = prometheus.NewDesc("ctibridge_login_names_over_budget", "User names that spent their budget of failed logins (30 by default): no address not known for them may try until the failures decay.", nil, nil)
	descNameRefused = prometheus.NewDesc("ctibridge_login_name_limit_refusals_total", "Login tries refused by the per-name limits (the shared delay and the budget).", nil, nil)

	// With a PostgreSQL --db only: the session table every node shares.
	descSharedListening = prometheus.NewDesc("ctibridge_sessions_shared_listening", "1 while this node hears the other nodes' session changes (LISTEN on the shared table, read whole since); 0: a logout elsewhere reaches this node only once it hears again.", nil, nil)
	descSharedFound     = prometheus.NewDesc("ctibridge_sessions_shared_found_total", "Tokens issued by another node found in the shared table (one query each, then held in memory).", nil, nil)
	descSharedRevoked   = prometheus.NewDesc("ctibridge_sessions_shared_revoked_total", "Sessions ended here because another node deleted them (a logout or revocation there): their WebSockets closed.", nil, nil)
	descSharedResyncs   = prometheus.NewDesc("ctibridge_sessions_shared_resyncs_total", "Whole reads of the shared table, each time the listening link is (re)established.", nil, nil)
	descSharedFailures  = prometheus.NewDesc("ctibridge_login_failures_shared_total", "Failed logins told to the other nodes (sent), heard from them and counted against the name's budget here (heard), or not told because the table was slow (dropped).", []string{"way"}, nil)
)

func (c authCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descUnderAttack, descOverBudget, descNameRefused, descSharedListening, descSharedFound, descSharedRevoked, descSharedResyncs, descSharedFailures} {
		ch <- d
	}
}

func (c authCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.a.GuardStats()
	ch <- prometheus.MustNewConstMetric(descUnderAttack, prometheus.GaugeValue, float64(st.UnderAttack))
	ch <- prometheus.MustNewConstMetric(descOverBudget, prometheus.GaugeValue, float64(st.OverBudget))
	ch <- prometheus.MustNewConstMetric(descNameRefused, prometheus.CounterValue, float64(st.Refused))
	sh := c.a.SharedStats()
	if !sh.Enabled {
		return
	}
	listening := 0.0
	if sh.Listening {
		listening = 1
	}
	ch <- prometheus.MustNewConstMetric(descSharedListening, prometheus.GaugeValue, listening)
	ch <- prometheus.MustNewConstMetric(descSharedFound, prometheus.CounterValue, float64(sh.Found))
	ch <- prometheus.MustNewConstMetric(descSharedRevoked, prometheus.CounterValue, float64(sh.Revoked))
	ch <- prometheus.MustNewConstMetric(descSharedResyncs, prometheus.CounterValue, float64(sh.Resyncs))
	ch <- prometheus.MustNewConstMetric(descSharedFailures, prometheus.CounterValue, float64(sh.FailuresSent), "sent")
	ch <- prometheus.MustNewConstMetric(descSharedFailures, prometheus.CounterValue, float64(sh.FailuresHeard), "heard")
	ch <- prometheus.MustNewConstMetric(descSharedFailures, prometheus.CounterValue, float64(sh.FailuresDropped), "dropped")
}
