// Package rest serves ctibridge's REST API (DESIGN.md "REST API"): login
// and tokens, reads of the live PBX state, call actions turned into AMI
// actions, and the OpenAPI document; plus the HTTP server around it
// (timeouts, header limit, HTTP/2 over TLS and h2c, graceful shutdown) and
// a connection wrapper that makes HTTP/1.1 pipelining pay by coalescing
// the responses to a pipelined batch into one socket write.
//
// Reads never encode JSON per request: they write the bytes the calls
// engine encoded once per change, with ETag, gzip and per-permission
// filtered copies made once per state version (reads.go). Actions are
// checked in full (body, permission through auth.Allowed, channels in the
// snapshot) before anything is sent to the PBX (actions.go). Errors become
// statuses in one place (errors.go).
//
// The phonebook and call history routes answer from the stores they are
// given (phonebook.Book or Remote, history.Store); an error matching
// sqldb.ErrUnavailable (their database out of reach or not yet migrated)
// is a 503 store_unavailable, not logged per request. It does not serve
// the WebSocket routes (package ws), nor /metrics, /healthz and pprof
// (package admin, on its own listener). It never locks the engine: it
// reads snapshots.
//
// Concurrency: the handler and server are safe for concurrent use; the
// only shared mutable state is the per-version read cache, which is
// replaced, never edited, when the snapshot changes.
package rest
