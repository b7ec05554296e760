package rest

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the REST API's Prometheus metrics. Create them with
// NewMetrics, register them on a registry with Register, and pass them in
// Config.Metrics. A nil *Metrics records nothing.
type Metrics struct {
	requests  *prometheus.CounterVec   // ctibridge_http_requests_total{route,code}
	latency   *prometheus.HistogramVec // ctibridge_http_request_duration_seconds{route}
	encodings *prometheus.CounterVec   // ctibridge_http_cache_encodings_total{kind}
	refusals  *prometheus.CounterVec   // ctibridge_login_refusals_total{reason}
}

// NewMetrics makes the metrics, unregistered.
func NewMetrics() *Metrics {
	return &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ctibridge_http_requests_total",
			Help: "REST requests answered, by route pattern and status code.",
		}, []string{"route", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "ctibridge_http_request_duration_seconds",
			Help:    "Time from routing a REST request to its handler's return, by route pattern.",
			Buckets: []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"route"}),
		encodings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ctibridge_http_cache_encodings_total",
			Help: "Response bodies made for the read cache: gzip copies and filtered views, each once per state version.",
		}, []string{"kind"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ctibridge_login_refusals_total",
			Help: "Refused logins, by reason: bad_credentials, or the limit that refused it (ip, user_address, user, user_budget).",
		}, []string{"reason"}),
	}
}

// Register adds the metrics to reg.
func (m *Metrics) Register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.requests, m.latency, m.encodings, m.refusals} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// knownCodes get pre-resolved counters, so counting them does not allocate.
var knownCodes = [...]int{200, 304, 400, 401, 403, 404, 405, 409, 413, 429, 500, 502, 503, 504}

// routeObs is one route's pre-resolved series.
type routeObs struct {
	m       *Metrics
	route   string
	latency prometheus.Observer
	codes   [len(knownCodes)]prometheus.Counter
}

func (m *Metrics) route(pattern string) *routeObs {
	if m == nil {
		return nil
	}
	o := &routeObs{m: m, route: pattern, latency: m.latency.WithLabelValues(pattern)}
	for i, c := range knownCodes {
		o.codes[i] = m.requests.WithLabelValues(pattern, strconv.Itoa(c))
	}
	return o
}

func (o *routeObs) observe(status int, d time.Duration) {
	if o == nil {
		return
	}
	o.latency.Observe(d.Seconds())
	for i, c := range knownCodes {
		if c == status {
			o.codes[i].Inc()
			return
		}
	}
	o.m.requests.WithLabelValues(o.route, strconv.Itoa(status)).Inc()
}

func (m *Metrics) encoded(kind string) {
	if m != nil {
		m.encodings.WithLabelValues(kind).Inc()
	}
}

func (m *Metrics) refused(reason string) {
	if m != nil {
		m.refusals.WithLabelValues(reason).Inc()
	}
}
