package loadtest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// countGhosts tells a PBX call still up (not a ghost), a ghost that
// clears before the recount (late) and one that does not (stuck), on
// screens and in REST, against a real HTTP server on loopback.
func TestCountGhostsLateAndStuck(t *testing.T) {
	s := testScreen(map[string][]observation{
		"3001": {{status: "busy", convs: 1}},
		"3002": {{status: "busy", convs: 1}},
		"3003": {{status: "busy", convs: 1}},
		"3004": {{status: "online"}},
	})
	var reads atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// 3001: the PBX's live call; 3002: late (gone on the second
		// read, and the screen, counted before the first read, catches
		// up after it); 3003: stuck; 3005: busy with no conversation
		// (a device state never brought back), stuck in REST.
		if reads.Add(1) == 1 {
			s.add(time.Now().UnixNano(), decodedUpdate{exten: "3002", o: observation{status: "online"}})
			w.Write([]byte(`{"3001":{"conversations":{"a":{}}},"3002":{"conversations":{"b":{}}},"3003":{"conversations":{"c":{}}},"3004":{"status":"online","conversations":{}},"3005":{"status":"busy"}}`))
			return
		}
		w.Write([]byte(`{"3001":{"conversations":{"a":{}}},"3002":{"status":"online","conversations":{}},"3003":{"conversations":{"c":{}}},"3004":{},"3005":{"status":"busy"}}`))
	}))
	defer srv.Close()

	chans := func() []string { return []string{"PJSIP/3001-0000002a"} }
	rep := &Report{Errors: map[string]uint64{}, FirstErrors: map[string]string{}, Counters: map[string]uint64{}}
	rep.countGhosts(context.Background(), ghostCheck{pbxChannels: chans, drain: 10 * time.Millisecond, recheck: 200 * time.Millisecond},
		E2EConfig{HTTP: srv.URL}, []*screen{s})
	want := map[string]uint64{"pbx_busy_extensions": 1, "ghost_calls": 2, "ghost_calls_rest": 3,
		"ghost_calls_stuck": 1, "ghost_calls_rest_stuck": 2, "ghost_calls_late": 1, "ghost_calls_rest_late": 1, "rest_shows_pbx_busy": 1}
	for k, v := range want {
		if rep.Counters[k] != v {
			t.Errorf("%s = %d, want %d (all: %v)", k, rep.Counters[k], v, rep.Counters)
		}
	}
	// A note each for the screen's and REST's stuck ghosts, naming them.
	if len(rep.Errors) != 0 || len(rep.Notes) != 2 || !strings.Contains(rep.Notes[0], "3003 busy/1") || !strings.Contains(rep.Notes[1], "3003 3005") {
		t.Errorf("errors %v, notes %q", rep.Errors, rep.Notes)
	}
}

// The ghost count reads the PBX's channels when it counts, not only at
// the end of the drain: 3007's call ended after the drain and REST and
// the screen still show it (a ghost); 3006's and 3008's began while REST
// was read (the PBX's calls, not ghosts). Taking the drain's list, the
// count called 3006 and 3008 REST ghosts and missed 3007 everywhere.
func TestCountGhostsRereadsPBX(t *testing.T) {
	s := testScreen(map[string][]observation{
		"3001": {{status: "busy", convs: 1}},
		"3007": {{status: "busy", convs: 1}},
	})
	var restRead atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		restRead.Store(true)
		w.Write([]byte(`{"3001":{"conversations":{"a":{}}},"3006":{"status":"ringing"},"3007":{"conversations":{"c":{}}},"3008":{"conversations":{"d":{}}}}`))
	}))
	defer srv.Close()
	start := time.Now()
	chans := func() []string {
		c := []string{"PJSIP/3001-00000001"}
		if time.Since(start) < 250*time.Millisecond {
			c = append(c, "PJSIP/3007-00000002")
		}
		if restRead.Load() {
			c = append(c, "PJSIP/3006-00000003", "PJSIP/3008-00000004")
		}
		return c
	}
	rep := &Report{Errors: map[string]uint64{}, FirstErrors: map[string]string{}, Counters: map[string]uint64{}}
	rep.countGhosts(context.Background(), ghostCheck{pbxChannels: chans, drain: 10 * time.Millisecond, settle: 500 * time.Millisecond, recheck: -1},
		E2EConfig{HTTP: srv.URL}, []*screen{s})
	want := map[string]uint64{"ghost_calls": 1, "ghost_calls_rest": 1, "rest_shows_pbx_busy": 3}
	for k, v := range want {
		if rep.Counters[k] != v {
			t.Errorf("%s = %d, want %d (all: %v)", k, rep.Counters[k], v, rep.Counters)
		}
	}
}

func TestChannelExtens(t *testing.T) {
	got := channelExtens([]string{"PJSIP/3001-0000002a", "PJSIP/3002-00000001", "SIP/a-b-00000003", "Local/x"})
	var keys []string
	for k := range got {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if !slices.Equal(keys, []string{"3001", "3002", "a-b", "x"}) {
		t.Errorf("got %v", keys)
	}
}

// A screen redraws from a resync snapshot: one that showed 1000 and
// 1001 in a call and then got the real hub's snapshot where they are
// free no longer counts them as ghosts. Before screens read resyncs, the
// load tool counted every extension whose hangup a screen got folded
// into a snapshot (the hub replaces an overflowing queue by one).
func TestScreenResyncClearsGhost(t *testing.T) {
	url, tok := hubServer(t)
	c, _, err := websocket.DefaultDialer.Dial(url, http.Header{"Authorization": {"Bearer " + tok}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The hub's engine turns the 50 extensions busy then free in turn,
	// one every 5 ms: subscribe again until a snapshot shows 1000 and
	// 1001 free (others are left out of the count).
	others := map[string]bool{}
	for i := 1002; i < 1050; i++ {
		others[strconv.Itoa(i)] = true
	}
	for deadline := time.Now().Add(20 * time.Second); ; {
		if err := c.WriteMessage(websocket.TextMessage, []byte(`{"op":"subscribe","topics":["extensions"]}`)); err != nil {
			t.Fatal(err)
		}
		var snap []byte
		for snap == nil {
			_, raw, err := c.ReadMessage()
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(raw), `"op":"snapshot"`) {
				snap = raw
			}
		}
		s := testScreen(map[string][]observation{"1000": {{status: "busy", convs: 1}}, "1001": {{status: "ringing"}}})
		if n := ghostCount(s, others); n != 2 {
			t.Fatalf("before the resync: %d ghosts, want 2", n)
		}
		s.resync(time.Now().UnixNano(), snap)
		if s.resyncs != 1 || len(s.byExten()) < 2 {
			t.Fatalf("%d resyncs, %d extensions after %s", s.resyncs, len(s.byExten()), trunc(snap))
		}
		if ghostCount(s, others) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no resync cleared the ghosts; last snapshot %s", snap)
		}
		time.Sleep(150 * time.Millisecond) // under the server's 10 messages a second
	}
}
