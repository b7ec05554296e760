package auth

import (
	"context"
	"crypto/rand"
	"sync/atomic"
)

// A user name's budget of failed logins (guard) is one for the whole
// deployment, not one per node: with Config.Shared, every failed login is
// told to the other nodes through the shared table's notifications, and a
// node counts the failures it hears against the name as its own (the
// address limits stay with the node that saw the address). Without it,
// an attacker spreading guesses over N nodes behind a load balancer would
// get N budgets.
//
// Telling is off the login's path: names wait in a bounded queue that one
// goroutine (Run) drains in batches; when the table is slow and the queue
// fills, further names are dropped and counted (SharedStats), so a flood
// of guesses never blocks a login or grows memory.

// failQueue bounds the failed logins waiting to be told to the other
// nodes.
const failQueue = 1024

// failBatch is the most names told in one statement.
const failBatch = 128

// maxToldName: longer names are not told (no user has one; the
// notification's payload has a size limit).
const maxToldName = 256

type sharedFails struct {
	self                 string      // this process among the nodes: its own notifications come back to it
	q                    chan string // names waiting to be told
	sent, heard, dropped atomic.Uint64
}

func newSharedFails() sharedFails {
	return sharedFails{self: rand.Text()[:16], q: make(chan string, failQueue)}
}

// failed counts a failed login here and, with a shared table, queues it
// for the other nodes.
func (s *Service) failed(username, ip string) {
	s.guard.failed(username, ip)
	if s.shared == nil || len(username) > maxToldName {
		return
	}
	select {
	case s.fails.q <- username:
	default:
		s.fails.dropped.Add(1)
	}
}

// failedElsewhere counts a failed login another node announced.
func (s *Service) failedElsewhere(from, username string) {
	if from == s.fails.self {
		return
	}
	s.fails.heard.Add(1)
	s.guard.failed(username, "another node")
}

// tellFailures tells the queued failures to the other nodes until ctx
// ends. A batch the table refuses is dropped (counted): the failures
// still count on this node.
func (s *Service) tellFailures(ctx context.Context) {
	batch := make([]string, 0, failBatch)
	for {
		select {
		case <-ctx.Done():
			return
		case name := <-s.fails.q:
			batch = append(batch[:0], name)
		}
	fill:
		for len(batch) < failBatch {
			select {
			case name := <-s.fails.q:
				batch = append(batch, name)
			default:
				break fill
			}
		}
		c, cancel := context.WithTimeout(ctx, sharedTimeout)
		err := s.shared.NoteFailures(c, s.fails.self, batch)
		cancel()
		if err != nil {
			s.fails.dropped.Add(uint64(len(batch)))
			s.log.Debug("failed logins not told to the other nodes", "count", len(batch), "err", err)
			continue
		}
		s.fails.sent.Add(uint64(len(batch)))
	}
}
