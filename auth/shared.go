package auth

import (
	"context"
	"time"
)

// SharedSessions is the session table every node of a deployment reads
// and writes: auth/authdb on PostgreSQL. With Config.Shared set, a Service
// writes its sessions there first (Store takes what it cannot), finds
// there a token another node issued (one query, then the session is held
// in memory: the hot path never queries), spends refresh tokens there so
// each is spent once across the nodes, and keeps its memory current by
// WatchSessions: a session deleted on any node (logout, revocation) is
// revoked here as soon as the change is heard, its WebSockets closed.
//
// Methods are called from any goroutine.
type SharedSessions interface {
	SessionStore
	// FindSession returns the session whose access token (its refresh
	// token, when refresh is set) hashes to h; ok is false if none does.
	FindSession(ctx context.Context, h [32]byte, refresh bool) (rec SessionRecord, ok bool, err error)
	// SessionByID returns the session named id; ok is false if none is.
	SessionByID(ctx context.Context, id string) (rec SessionRecord, ok bool, err error)
	// SpendRefresh clears session id's refresh token if it still hashes
	// to h, atomically across nodes, and reports whether this call did.
	SpendRefresh(ctx context.Context, id string, h [32]byte) (bool, error)
	// WatchSessions calls ready once it listens (what changed before may
	// have been missed; an error from ready ends the watch with it), then
	// changed for every session written (gone false) or deleted (gone
	// true) by any node, in order, and failed for every failed login
	// another node announced with NoteFailures (from names that node),
	// until ctx ends or the link fails: it returns why.
	WatchSessions(ctx context.Context, ready func() error, changed func(id string, gone bool), failed func(from, username string)) error
	// NoteFailures tells every node's WatchSessions that logins for
	// usernames failed on node from (sharedfail.go).
	NoteFailures(ctx context.Context, from string, usernames []string) error
}

// SharedStats is how a Service stands with the shared session table.
type SharedStats struct {
	Enabled   bool   // Config.Shared is set
	Listening bool   // hearing the other nodes' changes now (and the table read since)
	Found     uint64 // tokens of other nodes found in the table
	Revoked   uint64 // sessions revoked here because another node deleted them
	Resyncs   uint64 // whole-table reads after (re)connecting
	// Failed logins told to the other nodes, heard from them, and not
	// told because the queue to the table was full (sharedfail.go).
	FailuresSent, FailuresHeard, FailuresDropped uint64
}

// sharedLookups bounds the table lookups of unknown tokens in flight: a
// flood of made-up tokens costs the database at most this many queries at
// a time (the others are answered unknown at once).
const sharedLookups = 4

// sharedTimeout bounds one query of the shared table on a request's path.
const sharedTimeout = time.Second

// sharedRetry is the pause before listening again after the link failed.
const sharedRetry = time.Second

// findShared looks up a token this node does not hold in the shared table
// and, when it is there and alive, holds it from now on.
func (s *Service) findShared(h tokenHash, refresh bool) bool {
	select {
	case s.lookups <- struct{}{}:
		defer func() { <-s.lookups }()
	default:
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
	defer cancel()
	rec, ok, err := s.shared.FindSession(ctx, h, refresh)
	if err != nil || !ok {
		return false
	}
	if !s.adopt(rec) {
		return false
	}
	s.sharedFound.Add(1)
	return true
}

// adopt holds rec, a session read from the shared table (new here, or a
// newer state of one held: its refresh token spent), unless this process
// ended it. It reports whether rec is held now.
func (s *Service) adopt(rec SessionRecord) bool {
	if rec.ID == "" || rec.Revoked {
		return false
	}
	s.revokedMu.Lock()
	defer s.revokedMu.Unlock()
	if _, gone := s.revoked[rec.ID]; gone {
		return false
	}
	if s.tokens.upsert(rec) && rec.ClientAddr != "" {
		s.guard.remember(rec.Username, rec.ClientAddr, rec.Created)
	}
	return true
}

// dropShared revokes here the session id another node deleted: its
// watchers (WebSockets) are told at once. The store is not written: the
// row is gone already.
func (s *Service) dropShared(id string) {
	s.revokedMu.Lock()
	if s.revoked == nil {
		s.revoked = map[string]time.Time{}
	}
	s.revoked[id] = time.Now()
	s.revokedMu.Unlock()
	if len(s.tokens.revoke(func(se *session) bool { return se.rec.ID == id })) > 0 {
		s.sharedRevoked.Add(1)
	}
}

// refreshShared is Tokens.Refresh across nodes: the refresh token is
// spent in the shared table first (ErrTokenUnknown when another node
// spent it first). A table that does not answer leaves the decision to
// this node alone.
func (s *Service) refreshShared(refreshToken, clientAddr string) (Issued, SessionRecord, error) {
	h, ok := hashToken(refreshToken)
	if !ok {
		return Issued{}, SessionRecord{}, ErrTokenUnknown
	}
	rec, held := s.tokens.refreshRecord(h)
	if !held && s.findShared(h, true) {
		rec, held = s.tokens.refreshRecord(h)
	}
	if !held {
		return Issued{}, SessionRecord{}, ErrTokenUnknown
	}
	ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
	defer cancel()
	spentHere, err := s.shared.SpendRefresh(ctx, rec.ID, h)
	if err != nil {
		s.log.Warn("refresh token spent on this node alone: the shared session table does not answer", "session", rec.ID, "err", err)
		return s.tokens.Refresh(refreshToken, clientAddr)
	}
	// Spent in the table, by this call or another node's: gone here too
	// (the table's own notification may have done it already).
	s.tokens.dropRefresh(h)
	spent := rec
	spent.RefreshHash, spent.RefreshExp = tokenHash{}, time.Time{}
	if !spentHere {
		return Issued{}, SessionRecord{}, ErrTokenUnknown
	}
	if !s.tokens.now().Before(rec.RefreshExp) {
		return Issued{}, spent, ErrTokenExpired
	}
	is, err := s.tokens.IssueSession(rec.Username, clientAddr)
	return is, spent, err
}

// watchShared keeps the held sessions current with the shared table until
// ctx ends: every change another node makes, and a whole-table resync
// each time the link is (re)established.
func (s *Service) watchShared(ctx context.Context) {
	down := false
	for ctx.Err() == nil {
		err := s.shared.WatchSessions(ctx, func() error {
			if err := s.resyncShared(ctx); err != nil {
				return err
			}
			s.listening.Store(true)
			if down {
				s.log.Info("hearing the other nodes' sessions again")
				down = false
			}
			return nil
		}, s.sharedChanged, s.failedElsewhere)
		s.listening.Store(false)
		if ctx.Err() != nil {
			return
		}
		if !down {
			s.log.Warn("not hearing the other nodes' sessions: a logout elsewhere reaches this node only once the shared table answers again", "err", err)
			down = true
		}
		t := time.NewTimer(sharedRetry)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

func (s *Service) sharedChanged(id string, gone bool) {
	if gone {
		s.dropShared(id)
		return
	}
	if s.tokens.settled(id) {
		return // held with its refresh token spent: nothing left to change
	}
	ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
	defer cancel()
	if rec, ok, err := s.shared.SessionByID(ctx, id); err == nil && ok {
		s.adopt(rec)
	}
}

// resyncShared reads the whole table: sessions held here and gone from it
// were deleted while this node was not listening (revoked here now);
// sessions issued here while the table did not answer are written to it;
// sessions this process ended that the table still holds are deleted.
func (s *Service) resyncShared(ctx context.Context) error {
	recs, err := s.shared.LoadSessions(ctx)
	if err != nil {
		return err
	}
	s.sharedResyncs.Add(1)
	in := make(map[string]bool, len(recs))
	var ended []string
	for _, r := range recs {
		in[r.ID] = true
		if !s.adopt(r) {
			ended = append(ended, r.ID)
		}
	}
	for _, h := range s.tokens.held() {
		switch {
		case h.pending:
			s.persist(h.rec)
		case !in[h.rec.ID]:
			s.dropShared(h.rec.ID)
		}
	}
	if len(ended) > 0 {
		if err := s.shared.DeleteSessions(ctx, ended); err != nil {
			s.log.Warn("sessions ended here still in the shared table", "sessions", ended, "err", err)
		}
	}
	return nil
}

// SharedStats reports how the service stands with Config.Shared (zero
// without one).
func (s *Service) SharedStats() SharedStats {
	return SharedStats{Enabled: s.shared != nil, Listening: s.listening.Load(), Found: s.sharedFound.Load(), Revoked: s.sharedRevoked.Load(), Resyncs: s.sharedResyncs.Load(),
		FailuresSent: s.fails.sent.Load(), FailuresHeard: s.fails.heard.Load(), FailuresDropped: s.fails.dropped.Load()}
}

// upsert holds rec: added when new, its record replaced (watchers kept)
// when held. It reports whether it was new.
func (t *Tokens) upsert(rec SessionRecord) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.byID[rec.ID]
	if !ok {
		s = &session{rec: rec}
		t.m[rec.AccessHash] = s
		t.byID[rec.ID] = s
	} else {
		if s.rec.RefreshHash != (tokenHash{}) && s.rec.RefreshHash != rec.RefreshHash {
			delete(t.refresh, s.rec.RefreshHash)
		}
		s.rec = rec
	}
	s.pending = false
	if rec.RefreshHash != (tokenHash{}) {
		t.refresh[rec.RefreshHash] = s
	}
	return !ok
}

// refreshRecord returns the record of the session holding refresh token
// hash h.
func (t *Tokens) refreshRecord(h tokenHash) (SessionRecord, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if s, ok := t.refresh[h]; ok {
		return s.rec, true
	}
	return SessionRecord{}, false
}

// dropRefresh forgets refresh token hash h (spent elsewhere).
func (t *Tokens) dropRefresh(h tokenHash) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s, ok := t.refresh[h]; ok {
		delete(t.refresh, h)
		s.rec.RefreshHash, s.rec.RefreshExp = tokenHash{}, time.Time{}
	}
}

// settled reports whether session id is held with no refresh token left.
func (t *Tokens) settled(id string) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	s, ok := t.byID[id]
	return ok && s.rec.RefreshHash == (tokenHash{})
}

// setPending marks session id as written (or not) to the shared table.
func (t *Tokens) setPending(id string, pending bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s, ok := t.byID[id]; ok {
		s.pending = pending
	}
}

type heldSession struct {
	rec     SessionRecord
	pending bool
}

// held lists the sessions held, with whether each waits to be written to
// the shared table.
func (t *Tokens) held() []heldSession {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]heldSession, 0, len(t.byID))
	for _, s := range t.byID {
		out = append(out, heldSession{s.rec, s.pending})
	}
	return out
}
