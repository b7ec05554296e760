// Package wsframe reads the few header fields of a ctibridge WebSocket
// frame (op, seq, type, at, which the hub writes first) without decoding
// the JSON, so that a client measuring thousands of frames a second spends
// its time receiving them; and, on Linux, Readers: many WebSocket client
// connections read by a few goroutines through epoll, one shared buffer
// each, keeping only the head of each message (what a load tool that
// counts and times needs) or, from NewWholeReaders, handing over each
// whole message (what a screen that decodes what it shows needs). It is
// shared by package loadtest's WebSocket clients and loadtest/wsbench,
// and by nothing outside loadtest.
//
// Concurrency: UintField and StringField keep no state. A Readers may be
// dialled from any goroutine; its Handler is called under the lock of the
// worker that owns the connection (from that worker, or from Dial for
// what came with the upgrade's answer), never concurrently for one
// worker.
package wsframe
