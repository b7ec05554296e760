package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ctibridge/ctibridge/auth"
)

// authCollector exposes the login limits' view, read at scrape time.
type authCollector struct{ a *auth.Service }

var (
	descUnderAttack = prometheus.NewDesc("ctibridge_login_names_under_attack", "User names that failed to log in more than the free number of times recently (10 by default): their unknown addresses share one growing delay.", nil, nil)
	descOverBudget  = prometheus.NewDesc("ctibridge_login_names_over_budget", "User names that spent their budget of failed logins (30 by default): no address not known for them may try until the failures decay.", nil, nil)
	descNameRefused = prometheus.NewDesc("ctibridge_login_name_limit_refusals_total", "Login tries refused by the per-name limits (the shared delay and the budget).", nil, nil)
)

func (c authCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descUnderAttack, descOverBudget, descNameRefused} {
		ch <- d
	}
}

func (c authCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.a.GuardStats()
	ch <- prometheus.MustNewConstMetric(descUnderAttack, prometheus.GaugeValue, float64(st.UnderAttack))
	ch <- prometheus.MustNewConstMetric(descOverBudget, prometheus.GaugeValue, float64(st.OverBudget))
	ch <- prometheus.MustNewConstMetric(descNameRefused, prometheus.CounterValue, float64(st.Refused))
}
