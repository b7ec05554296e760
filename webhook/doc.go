// Package webhook sends call events to configured HTTP receivers (CRMs,
// scripts) as signed JSON POSTs: a call ringing at an extension (with the
// phonebook's name for the caller and the queue it came through),
// answered, hung up (with its talk time), and a CDR taken by the
// recorder. docs/webhooks.md is the receiver's reference.
//
// The call events are derived from the engine's change feed, as the
// screens see it: an extension's channel appearing unconnected on an
// incoming call rings, its first connection answers, its disappearance
// hangs up. The tracker follows channels (uniqueid), not conversation
// ids, so a call re-keyed by a queue or a transfer is one call. At start
// the calls in progress are taken silently; after a gap in the feed (the
// reader fell behind the ring buffer) the difference with the current
// snapshot is raised; when the feed jumped to a new generation (a bus
// rollover: calls.Engine.Adopt) what the reader had not read of the
// generation before is applied first (calls.Feed.Previous), then the new
// one's changes are replayed (window.go), so that a call wholly inside
// the rollover's resync, or wholly in the old generation's last changes
// while the reader was behind, is seen. CDR events come from history.RecorderConfig.OnTaken,
// after the CDR is fsynced to the recorder's spool.
//
// Every event has an idempotency key, "<linkedid>:<uniqueid>:<type>" (a
// CDR adds ":<sequence>"), in its "id" and the Idempotency-Key header.
// The body is signed with HMAC-SHA256 over "<timestamp>.<body>" with the
// webhook's secret (X-Ctibridge-Timestamp, X-Ctibridge-Signature), so a
// receiver can check who sent it and refuse replays.
//
// Delivery is decoupled from the engine: the feed reader only appends to
// each webhook's bounded memory queue (dropping, counted, when it is
// full), a writer moves that queue to an on-disk queue (package wal) with
// one fsync per group, and a sender POSTs the disk queue in order, one
// event at a time, through an upstream.Client (pooled connections, a
// static bearer token or OAuth2 client credentials). Failures (transport,
// timeout, 5xx, 408, 425, 429) are retried with full-jitter backoff
// without limit while the disk queue holds the events (bounded; new
// events are dropped beyond it); other 4xx refuse the event for good. The
// queue position moves after each 2xx, so what the receiver acknowledged
// is not sent again, across restarts too; a crash between the 2xx and the
// position write, or the loss of the position file, resends: delivery is
// at least once, and the key makes it idempotent.
//
// Several PBXs (Options.PBXs): each named PBX's engine has its own feed
// reader and tracker; its events carry "pbx" and its ids qualified
// ("site2:201"), its CDRs' pbx is read from their qualified uniqueid. The
// default PBX's events are as with one PBX.
//
// Options.Sending (the default PBX's) and PBX.Sending (a named PBX's)
// let several nodes follow the same calls while one sends each PBX's (on
// the bus, the PBX's leading bridge): the others track the PBX's calls
// without emitting, and hold the call events they derive and the CDRs
// they take for Options.CDRHold (hold.go; at most holdMaxEvents call
// events), sent once they send, oldest first, before what follows (a
// takeover's: what the old sender had not sent when it lost the lead;
// ids may repeat). The queues are one a webhook
// whatever the PBX; Options.Drain moves those of an earlier layout (a
// service a PBX) into them.
//
// The package does not read flags or the environment; LoadFile reads a
// webhooks file. A Service's Run owns its goroutines (feed reader, and a
// writer and a sender per webhook) and waits for them; CDRs and Stats are
// safe from any goroutine.
package webhook
