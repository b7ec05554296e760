// Package httpserve is the HTTP transport in front of ctibridge's
// handlers: an http.Server with its timeouts and header limit (server.go),
// HTTP/1.1, HTTP/2 over TLS and h2c with prior knowledge, a TLS
// certificate that can be reloaded while serving, graceful shutdown, and
// a listener whose connections make HTTP/1.1 pipelining pay by coalescing
// the responses to a pipelined batch into one socket write (pipeline.go,
// docs/http-pipelining.md).
//
// It knows no route and no handler: cmd/ctibridge serves one mux through
// it, with the REST API (package rest), the WebSocket hub (package ws,
// whose upgraded connections leave the coalescing as they are hijacked)
// and the panel. The admin listener does not use it.
//
// Concurrency: a Server is safe for concurrent use once New returns;
// ReloadTLS may run while serving. A coalescing connection is used by
// net/http's goroutines for that connection and its flush timer, and
// guards its state with one mutex.
package httpserve
