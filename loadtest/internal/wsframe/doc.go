// Package wsframe reads the few header fields of a ctibridge WebSocket
// frame (op, seq, type, at, which the hub writes first) without decoding
// the JSON, so that a client measuring thousands of frames a second spends
// its time receiving them. It is shared by package loadtest's WebSocket
// clients and the loadtest/wsbench program, and by nothing outside
// loadtest.
//
// Concurrency: its functions keep no state.
package wsframe
