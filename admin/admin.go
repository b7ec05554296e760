// Package admin serves the operator-facing endpoints of a ctibridge process
// on their own listener (127.0.0.1 by default): /healthz (the process is up),
// /readyz (the PBX link is up and the state resynchronised; other parts'
// states may follow in the body), /metrics
// (Prometheus text format) and /debug/pprof.
//
// The handler is safe for concurrent use; it only reads what the callbacks
// it is given return.
package admin

import (
	"net/http"
	"net/http/pprof"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// NewHandler returns the admin mux. ready reports readiness; reg holds the
// metrics to expose. Each of details, when given, adds a line to /readyz's
// body (the state of a part readiness does not depend on, such as the
// database) without changing its status.
func NewHandler(reg *prometheus.Registry, ready func() bool, details ...func() string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		body := "ready\n"
		if !ready() {
			w.WriteHeader(http.StatusServiceUnavailable)
			body = "not ready: pbx link down or resynchronising\n"
		}
		for _, d := range details {
			body += d() + "\n"
		}
		w.Write([]byte(body))
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}
