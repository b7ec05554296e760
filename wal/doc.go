// Package wal is a bounded, segmented write-ahead log of JSON records on
// disk: the spool behind the CDR recorder (history) and the per-webhook
// queues (webhook).
//
// A writer goroutine appends groups of records with one write and one
// fsync per group (group commit: the caller gathers what arrived during
// the previous fsync); a record counts as taken once Append returns. A
// drainer goroutine hands the records, in order, to a consumer and
// records its position after each batch the consumer accepted; what the
// consumer refused stays for the next Drain, in this process or the
// next. A crash between a consumer's acceptance and the position update
// replays that batch, so consumers need an idempotent key.
//
// The log holds at most Options.Max bytes not yet consumed: Append refuses
// a group that would pass it (ErrFull) and the caller counts the drop.
// Recently appended groups stay in memory (a bounded number of records)
// so that a drainer that keeps up never reads the file back.
//
// It does no I/O other than its directory and uses the standard library
// only. One goroutine appends and one drains; Stats and Free are safe from
// any goroutine.
package wal
