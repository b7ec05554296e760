package ws

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the hub's counters. Flushers add once per write, not per
// message.
type metrics struct {
	clients   prometheus.Gauge
	messages  prometheus.Counter
	writes    prometheus.Counter
	bytes     prometheus.Counter
	paced     prometheus.Counter
	coalesced prometheus.Counter
	resumes   prometheus.Counter
	snapshots *prometheus.CounterVec
	closed    *prometheus.CounterVec
}

func newMetrics(r prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		clients: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ctibridge_ws_clients", Help: "WebSocket clients connected (upgraded, authenticated or not).",
		}),
		messages: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ctibridge_ws_messages_sent_total", Help: "WebSocket messages written to clients (events, snapshots, replies).",
		}),
		writes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ctibridge_ws_writes_total", Help: "Socket writes to WebSocket clients; messages_sent_total over this is the batching.",
		}),
		paced: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ctibridge_ws_fanout_paced_total", Help: "Times the fan-out waited for its write budget (ws WriteRate), so that changes went out in batches.",
		}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ctibridge_ws_bytes_sent_total", Help: "Bytes written to WebSocket clients, frame headers included.",
		}),
		coalesced: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ctibridge_ws_coalesced_total", Help: "Queued updates replaced by a newer update of the same entity before they were sent.",
		}),
		resumes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ctibridge_ws_resumes_total", Help: "Subscriptions served from the replay buffer instead of a snapshot.",
		}),
		snapshots: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ctibridge_ws_snapshots_sent_total", Help: "Snapshots sent: reason=subscribe, resync (queue overflow; a snapshot resent), or local (the node said on its own that its state is stale, or no longer: package bus).",
		}, []string{"reason"}),
		closed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ctibridge_ws_closed_total", Help: "Client connections ended, by reason: slow (4008 or dropped), flood (4008: sent too much), expired, auth_failed, no_token, protocol, shutdown, client, gone, write_error.",
		}, []string{"reason"}),
	}
	for _, r := range []string{"subscribe", "resync", "local"} {
		m.snapshots.WithLabelValues(r)
	}
	for _, r := range []string{"slow", "flood", "expired", "auth_failed", "no_token", "protocol", "shutdown", "client", "gone", "write_error"} {
		m.closed.WithLabelValues(r)
	}
	if r != nil {
		for _, c := range []prometheus.Collector{m.clients, m.messages, m.writes, m.bytes, m.paced, m.coalesced, m.resumes, m.snapshots, m.closed} {
			if err := r.Register(c); err != nil {
				return nil, fmt.Errorf("ws: register metrics: %w", err)
			}
		}
	}
	return m, nil
}

// wrote counts one socket write of msgs messages and n bytes.
func (m *metrics) wrote(msgs int, n int64) {
	m.writes.Inc()
	if msgs > 0 {
		m.messages.Add(float64(msgs))
	}
	if n > 0 {
		m.bytes.Add(float64(n))
	}
}

// wroteMany counts writes socket writes of msgs messages and n bytes in
// all.
func (m *metrics) wroteMany(writes, msgs int, n int64) {
	m.writes.Add(float64(writes))
	m.messages.Add(float64(msgs))
	m.bytes.Add(float64(n))
}
