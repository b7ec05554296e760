// Package ws serves the live state to CTI clients over WebSocket (GET
// /ws): a snapshot tagged with the feed's seq, then every change as a
// seq-numbered event, filtered per client by the same permission view as
// REST (auth.View), with resume from the engine's feed after a reconnect.
// The protocol is in docs/websocket.md.
//
// How it goes fast: every change is encoded once per visibility (full or
// redacted), as a complete WebSocket frame shared by all its recipients;
// each client's writer sends everything queued for it in one writev. The
// frames are written by this package, not by gorilla/websocket, which
// handles only the upgrade and the reading of client frames.
//
// How it stays exact without letting a slow client hold back the rest:
// a client's queue keeps at most the latest update per entity (a newer
// one replaces the queued one, so its seq may skip but its state stays
// true); a queue that still overflows is replaced by a fresh snapshot; a
// client that cannot take its frames within Config.SlowTimeout is closed
// with 4008 (or dropped, if a write was stuck half-way).
//
// What it does not do: it never writes to the engine, it does not send
// AMI actions (clients use REST for those), and it does not compress
// (permessage-deflate would cost a compression per client per message).
//
// Concurrency: one goroutine (Hub.Run) reads the feed and queues frames;
// it never blocks on a client. Each connection has a reader (the ServeHTTP
// goroutine) and a writer goroutine, both ended and waited for before
// ServeHTTP returns. The engine never blocks on the hub: the hub reads the
// feed at its own pace, and if it fell a whole feed behind it would resend
// snapshots. Client is the matching Go client, safe for one reader and one
// writer at a time.
package ws
