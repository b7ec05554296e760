package link_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/ami/amitest"
)

// TestConnectWhileBootingResyncsAtFullyBooted: with the fast reconnect
// the bridge may log in while Asterisk is still loading modules (no
// FullyBooted after the login response, lists still short). When
// FullyBooted comes, the lists are read again.
func TestConnectWhileBootingResyncsAtFullyBooted(t *testing.T) {
	srv := amitest.NewServer(t)
	var booted atomic.Bool
	srv.Handle("Login", func(_ context.Context, se *ami.Session, req ami.Message) []ami.Message {
		if req.Get("Username") != amitest.User || req.Get("Secret") != amitest.Secret {
			return []ami.Message{amitest.Response("Error", "Message", "Authentication failed")}
		}
		se.Authorize(amitest.User, true)
		return []ami.Message{amitest.Response("Success", "Message", "Authentication accepted")} // no FullyBooted yet
	})
	eng, _, lk := startVia(t, srv, srv.Addr())
	// Hints are loaded last: listed only once booted.
	srv.Handle("ExtensionStateList", func(_ context.Context, _ *ami.Session, _ ami.Message) []ami.Message {
		out := []ami.Message{amitest.Response("Success", "EventList", "start")}
		if booted.Load() {
			out = append(out, amitest.Event("ExtensionStatus", "Exten", "201", "Context", "from-internal", "Hint", "PJSIP/201", "Status", "1", "StatusText", "InUse"))
		}
		return append(out, amitest.Event("ExtensionStateListComplete", "EventList", "Complete"))
	})
	waitFor(t, eng, "link live", func(s state) bool { return s.PBX.PBX == "live" })
	resyncs := lk.Stats().Resyncs
	booted.Store(true)
	srv.Broadcast(amitest.Event("FullyBooted", "Status", "Fully Booted"))
	waitFor(t, eng, "201 busy from the second resync", func(s state) bool {
		return s.PBX.PBX == "live" && s.Extensions["201"].Status == "busy"
	})
	if got := lk.Stats().Resyncs; got != resyncs+1 {
		t.Errorf("resyncs %d -> %d, want one more", resyncs, got)
	}
}
