// Package loadtest drives ctibridge (or any HTTP server) with load and
// reports what it measured, for the lab binary cmd/ctibridge-lab (the
// shipped ctibridge links none of it): an HTTP/1.1 load generator with pipelining and
// an open-loop mode free of coordinated omission, a WebSocket fan-out
// client swarm, and an end-to-end run that places SIP calls through pbxsim
// (with SIPp or built-in sipgo phones) and times how long each call takes
// to show on the WebSocket clients' screens. A bridge a run needs is a
// `ctibridge serve` process (StartBridge). The e2e run's pbxsim runs in a
// child process (StartE2EChild, the lab's `loadtest e2e-bridge`,
// ServeE2EBridge on the child's side) that starts the bridge, so that the
// screens and the calls' driver take none of the bridge's CPU, and the
// report reads the bridge's CPU from /proc and its hub's writes from
// /metrics.
//
// RunSynth is the same measure at call-centre scale without SIP: a
// SynthAMI (an ami.Server on loopback in front of loadtest/synthpbx, the
// synthetic Asterisk 22 that the engine's benchmarks also use) holds
// thousands of extensions, queues of them and calls, and emits their AMI
// events at a given call rate: a mix of internal, trunk (in and out),
// queue, transferred (blind and attended) and forwarded (trunk in to
// trunk out) calls in the shapes of the recordings; it answers the bridge's resync and reconcile lists from
// its state. The run times the ringing and answer events of the internal
// calls to the screens, REST reads, and the engine's cost from the
// bridge's /metrics. ServeSynth
// runs the same synthetic PBX and calls for bridges started elsewhere
// (several at once: bench/edges.sh has a bus bridge and a plain serve
// follow it) and writes each call's start time per callee, from which
// the lab's wsbench -stamps times the screens in other processes. The AMI
// fault proxy of RunChaos is ami/amiproxy.
//
// RunChaos is the fault suite: it runs a real `ctibridge serve` child
// process against pbxsim with SIPp traffic and breaks things. The AMI link
// goes through a TCP proxy that kills it, goes half-open or sends a line
// that never ends, and through a network namespace (bus/natstest/netns,
// as root) whose link is taken down, while the bridge's REST state is
// judged against
// pbxsim's channels; a throwaway PostgreSQL is down when serve starts and
// serve is killed with -9, then the CDRs stored are counted against the
// Cdr events the proxy handed to a bridge; one WebSocket client floods
// subscribe while others measure their latency and serve's RSS is
// sampled. Its serve processes, as a supervisor's, listen on ports the
// kernel picks at the first start (read back from the log), kept for the
// restarts. Each figure is reported against its target; invariants
// (no crash, no ghost call once converged, no CDR stored twice) are told
// apart from targets, which hold only once the fixes have landed.
//
// RunFailover is the scale-out takeover (docs/scale-out.md): a 3-server
// nats-server cluster (bus/natstest/natscluster), two `serve --bus`
// bridges and the edges as child processes, pbxsim with SIPp calls and a
// throwaway PostgreSQL both bridges record CDRs in. It kills the leading
// bridge with SIGKILL again and again (a supervisor starts it again as a
// standby) and times, per kill, the lease taken (read from the bus's KV
// bucket), the new leader's steps (from its log), every edge's WebSocket
// client told stalled, then live again; then it judges the edges' REST
// and WebSocket state (the admin's and users' limited to some extensions)
// against pbxsim's channels, resumes a WebSocket client on the other edge
// with its seq and epoch. Between those kills it kills a nats-server
// (calls must keep reaching the edges) and an edge (its clients resume on
// another and miss no change), cuts the leader off from NATS (each
// bridge's NATS connections go through a network namespace of its own:
// the leader's link is taken down while actions are asked of it over
// REST and pbxsim logs every action with the bridge that sent it), and
// at the end counts the CDR rows against the calls completed; every
// WebSocket client is sampled against pbxsim all along (firm mismatches
// while live).
//
// It talks to ctibridge only over the network: it never imports rest or
// ws, so what it measures is what a client sees (the fault suite also
// signals the serve process it started and reads its RSS from /proc).
// Latencies go into a log-linear Histogram (HdrHistogram's layout, about
// 1% precision), never into a slice of every sample. Reports render as an
// autocannon-like table, as JSON (the shape in docs/loadtest.md, "Common
// flags") and as a self-contained HTML page with inline SVG plots.
//
// Beside it in the lab: loadtest/wsbench measures the WebSocket hub
// alone (it runs ws in a server process of its own, so it imports ws; this
// package does not), or with -url the clients of a running serve or edge,
// and bench/run.sh runs the standard suite with the lab's restbench as
// its REST server. loadtest/internal/wsframe reads
// frame header fields for both, and its epoll Readers read wsbench's
// clients, RunWS's with WSConfig.Epoll (each message handed to the same
// per-message code as gorilla's client) and RunE2E's and RunSynth's
// screens (their own handler: a look at each message's head, one decode
// per change and reader goroutine): a few goroutines for thousands of
// connections.
//
// Concurrency: RunHTTP, RunWS, RunE2E, RunChaos and RunFailover each own every
// goroutine (and child process) they start and return only after all
// have stopped, at the latest a grace period after their configured
// duration (RunChaos: after each of its phases, all bounded). A Histogram
// is not safe for concurrent use; a Report is immutable once returned.
// A Bridge from StartBridge owns its serve process (a goroutine waits for
// it) until Stop, which the caller must call.
package loadtest
