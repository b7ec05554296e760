package link_test

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/ami/amitest"
	"github.com/ctibridge/ctibridge/calls"
	"github.com/ctibridge/ctibridge/link"
)

// recording returns the events of a real recording.
func recording(t *testing.T, name string) []ami.Message {
	t.Helper()
	var out []ami.Message
	for _, m := range amitest.ReadRecording(t, "../ami/testdata/"+name) {
		if m.Kind() == ami.KindEvent {
			out = append(out, m)
		}
	}
	return out
}

// state is the part of a snapshot these tests look at.
type state struct {
	PBX struct {
		PBX string `json:"pbx"`
	} `json:"pbx"`
	Extensions map[string]struct {
		Status        string                    `json:"status"`
		Conversations map[string]map[string]any `json:"conversations"`
	} `json:"extensions"`
}

func decode(t *testing.T, s *calls.Snapshot) state {
	t.Helper()
	var st state
	if s == nil {
		return st
	}
	if err := json.Unmarshal(s.StateJSON(), &st); err != nil {
		t.Fatalf("snapshot JSON: %v", err)
	}
	return st
}

// waitFor polls the engine's snapshot until ok holds.
func waitFor(t *testing.T, eng *calls.Engine, what string, ok func(state) bool) state {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		st := decode(t, eng.Snapshot())
		if ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; last state %+v", what, st)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitFeed waits until the engine's feed holds, after seq since, a change
// ok says yes to.
func waitFeed(t *testing.T, eng *calls.Engine, since uint64, what string, ok func(calls.Change) bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		cs, kept := eng.Feed().Since(since)
		if !kept {
			t.Fatalf("waiting for %s: the feed no longer holds the changes after %d", what, since)
		}
		if slices.ContainsFunc(cs, ok) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s in the feed after %d (%d changes)", what, since, len(cs))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// listReply scripts a list action's answer: the start response, the items,
// the completing event.
func listReply(srv *amitest.Server, action, complete string, items ...ami.Message) {
	srv.Handle(action, func(_ context.Context, _ *ami.Session, _ ami.Message) []ami.Message {
		out := []ami.Message{amitest.Response("Success", "EventList", "start", "Message", "list will follow")}
		out = append(out, items...)
		return append(out, amitest.Event(complete, "EventList", "Complete", "ListItems", "0"))
	})
}

type harness struct {
	srv    *amitest.Server
	eng    *calls.Engine
	client *ami.Client
	link   *link.Link
}

func start(t *testing.T) *harness {
	return startWith(t, link.Config{RetryDelay: 20 * time.Millisecond, ReconcileEvery: -1})
}

// startWith starts a harness whose PBX lists no channels (until a test
// handles CoreShowChannels itself) and a link configured by cfg.
func startWith(t *testing.T, cfg link.Config) *harness {
	t.Helper()
	srv := amitest.NewServer(t)
	listReply(srv, "CoreShowChannels", "CoreShowChannelsComplete")
	for _, l := range [][2]string{{"ExtensionStateList", "ExtensionStateListComplete"}, {"PJSIPShowEndpoints", "EndpointListComplete"},
		{"PJSIPShowContacts", "ContactListComplete"}, {"DeviceStateList", "DeviceStateListComplete"},
		{"QueueStatus", "QueueStatusComplete"}, {"ParkedCalls", "ParkedCallsComplete"}} {
		listReply(srv, l[0], l[1])
	}
	ccfg := srv.ClientConfig()
	// Slow enough reconnects that the tests can see the link down.
	ccfg.ReconnectMin, ccfg.ReconnectMax = 300*time.Millisecond, 300*time.Millisecond
	client := ami.NewClient(ccfg)
	eng := calls.New(calls.Config{})
	lk := link.New(client, eng, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { client.Run(ctx) })
	wg.Go(func() { lk.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	return &harness{srv, eng, client, lk}
}

// TestReconnectMidCallConverges kills the AMI connection in the middle of a
// call; while it is down the call ends on the PBX. After the reconnect and
// resync the engine must not show the call any more, and while the link was
// down it must have said so.
func TestReconnectMidCallConverges(t *testing.T) {
	h := start(t)
	waitFor(t, h.eng, "link live", func(s state) bool { return s.PBX.PBX == "live" })
	if !h.link.Ready() {
		t.Fatal("link not ready after resync")
	}

	// Play the basic call up to both parties bridged.
	msgs := recording(t, "basic_call_caller_hangup.ami")
	bridged := 0
	for _, m := range msgs {
		h.srv.Broadcast(m)
		if m.Event() == "BridgeEnter" {
			if bridged++; bridged == 2 {
				break
			}
		}
	}
	waitFor(t, h.eng, "201 in a connected call", func(s state) bool {
		for _, c := range s.Extensions["201"].Conversations {
			return c["connected"] == true && c["counterpartNum"] == "202"
		}
		return false
	})

	// The connection dies; the call ends meanwhile (CoreShowChannels will
	// list nothing), and the hangups are never seen.
	since := h.eng.Feed().LastSeq()
	h.srv.Drop()
	// Down, read from the feed: the link may be down, resynced and live
	// again between two looks at the snapshot (a reconnect is 300 ms; a
	// test goroutine under -race on a busy machine can sleep longer).
	waitFeed(t, h.eng, since, "pbx down", func(c calls.Change) bool {
		return c.Type == calls.PBXStatus && !bytes.Contains(c.Data, []byte(`"pbx":"live"`))
	})
	st := waitFor(t, h.eng, "live again after resync", func(s state) bool { return s.PBX.PBX == "live" && h.link.Ready() })
	for ext, e := range st.Extensions {
		if len(e.Conversations) != 0 {
			t.Errorf("extension %s still shows %d conversations after resync: a ghost call", ext, len(e.Conversations))
		}
	}
	if got := h.link.Stats().Resyncs; got < 2 {
		t.Errorf("resyncs = %d, want at least 2", got)
	}
}

// TestResyncFindsCallStartedWhileDown: a call that started while the link
// was down appears after the resync from CoreShowChannels.
func TestResyncFindsCallStartedWhileDown(t *testing.T) {
	h := start(t)
	waitFor(t, h.eng, "link live", func(s state) bool { return s.PBX.PBX == "live" })
	// From status_actions_during_call: the CoreShowChannel items of a call
	// 201 -> 202 in progress.
	var items []ami.Message
	for _, m := range recording(t, "status_actions_during_call.ami") {
		if m.Event() == "CoreShowChannel" {
			items = append(items, m)
		}
	}
	if len(items) < 2 {
		t.Fatalf("recording has %d CoreShowChannel items", len(items))
	}
	h.srv.Handle("CoreShowChannels", func(_ context.Context, _ *ami.Session, _ ami.Message) []ami.Message {
		out := []ami.Message{amitest.Response("Success", "EventList", "start")}
		out = append(out, items...)
		return append(out, amitest.Event("CoreShowChannelsComplete", "EventList", "Complete"))
	})
	h.srv.Drop()
	waitFor(t, h.eng, "call from the resync", func(s state) bool {
		return s.PBX.PBX == "live" && len(s.Extensions["201"].Conversations) == 1
	})
}

// TestRestartResyncs: Shutdown then FullyBooted on a live link marks the
// state stale, then resynchronises.
func TestRestartResyncs(t *testing.T) {
	h := start(t)
	waitFor(t, h.eng, "link live", func(s state) bool { return s.PBX.PBX == "live" })
	before := h.link.Stats().Resyncs
	h.srv.Broadcast(amitest.Event("Shutdown", "Shutdown", "Cleanly", "Restart", "True"))
	waitFor(t, h.eng, "stale after Shutdown", func(s state) bool { return s.PBX.PBX == "resyncing" })
	if h.link.Ready() {
		t.Error("ready during a PBX restart")
	}
	h.srv.Broadcast(amitest.Event("FullyBooted", "Status", "Fully Booted"))
	waitFor(t, h.eng, "live after FullyBooted", func(s state) bool { return s.PBX.PBX == "live" })
	if got := h.link.Stats().Resyncs; got != before+1 {
		t.Errorf("resyncs = %d, want %d", got, before+1)
	}
}
