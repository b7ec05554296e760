// Package loadtest drives ctibridge (or any HTTP server) with load and
// reports what it measured: an HTTP/1.1 load generator with pipelining and
// an open-loop mode free of coordinated omission, a WebSocket fan-out
// client swarm, and an end-to-end run that places SIP calls through pbxsim
// (with SIPp or built-in sipgo phones) and times how long each call takes
// to show on the WebSocket clients' screens.
//
// It talks to ctibridge only over the network: it never imports rest or
// ws, so what it measures is what a client sees. Latencies go into a
// log-linear Histogram (HdrHistogram's layout, about 1% precision), never
// into a slice of every sample. Reports render as an autocannon-like table,
// as JSON (the shape in docs/loadtest.md, "Common flags") and as a self-contained
// HTML page with inline SVG plots.
//
// The programs beside it: loadtest/wsbench measures the WebSocket hub
// alone (it runs ws in a server process of its own, so it imports ws; this
// package does not), and bench/run.sh runs the standard suite with
// rest/internal/bench as its REST server. loadtest/internal/wsframe reads
// frame header fields for both.
//
// Concurrency: RunHTTP, RunWS and RunE2E each own every goroutine they
// start and return only after all have stopped, at the latest a grace
// period after their configured duration. A Histogram is not safe for
// concurrent use; a Report is immutable once returned.
package loadtest
