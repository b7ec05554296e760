package main

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ctibridge/ctibridge/pbxsim"
	"github.com/ctibridge/ctibridge/ws"
)

// TestBusDeposedOnePBX: a bridge deposed for one PBX loses that PBX's
// lead only. Bridges A and B both follow the default PBX and site2; A,
// started first, leads both, with a call up on each. Another writer
// takes the default PBX's lease from A (as a bridge that thought A dead
// would): A steps down for the default PBX and stands by for it again,
// B leads it. A goes on running and leading site2: site2 is never
// anything but live on A's WebSocket, which is sent no new snapshot and
// whose seqs go on one by one, and site2's link did not resync; the
// default PBX's call, led by B now, is still on A. Hangups asked on A
// reach both PBXs (the default PBX's through B), and the default PBX's
// call is then gone from A and B (A's clients follow the stream, no
// ghost call).
func TestBusDeposedOnePBX(t *testing.T) {
	url, def, s2, start := twoPBXBridges(t)
	bridge := func(node string) *busNode { return start(node) }
	waitRoles := func(n *busNode, want [2]string) { t.Helper(); waitBusRoles(t, n, want) }
	a := bridge("bridge-a")
	waitRoles(a, [2]string{"leader", "leader"})
	b := bridge("bridge-b")
	waitRoles(b, [2]string{"standby", "standby"})

	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	ad := login(t, "http://"+a.api, "admin", "pw")
	dcall, scall := callOnEach(ctx, t, def, s2)
	exts := ad.waitExtensions("a call up on each PBX", func(m map[string]restExtension) bool {
		return onlyConvOf(m["201"]).Connected && onlyConvOf(m["202"]).Connected && onlyConvOf(m["site2:201"]).Connected && onlyConvOf(m["site2:202"]).Connected
	})
	dcv, scv := onlyConvOf(exts["201"]), onlyConvOf(exts["site2:201"])
	site2Before := pbxView(ad.extensions("?pbx=site2"))
	site2Resyncs := a.metric(t, `ctibridge_resyncs_total{pbx="site2"}`)
	wc, snap := wsExtensions(ctx, t, a.api, ad.token)
	if snap.Stale {
		t.Fatalf("A's snapshot before the deposal is stale: %s", snap.PBX)
	}

	// Take the default PBX's lease from A.
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	kv, err := js.KeyValue(ctx, "ctibridge_leases")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "default", []byte("intruder")); err != nil {
		t.Fatal(err)
	}

	// On A's WebSocket the default PBX goes down or resyncing (B's
	// takeover), then live; site2 stays live; the seqs run on.
	last := snap.Seq
	defStates := watchLeadMove(ctx, t, wc, "default", "site2", func(m ws.Message) {
		if m.Op != "event" {
			t.Fatalf("A's WebSocket sent %s after the deposal (seq %d): its client resynchronised", m.Op, m.Seq)
		}
		if m.Seq != last+1 {
			t.Fatalf("A's WebSocket event seq %d after %d", m.Seq, last)
		}
		last = m.Seq
	})
	t.Logf("the default PBX on A after the deposal: %v", defStates)
	if !slices.ContainsFunc(defStates, func(st string) bool { return st == "down" || st == "resyncing" }) {
		t.Errorf("the default PBX's states on A after the deposal: %v, want down or resyncing before live", defStates)
	}
	select {
	case err := <-a.done:
		t.Fatalf("A stopped after the deposal: %v\n%s", err, a.logs)
	default:
	}
	waitRoles(b, [2]string{"leader", "standby"})
	waitRoles(a, [2]string{"standby", "leader"})
	if got := a.metric(t, `ctibridge_resyncs_total{pbx="site2"}`); got != site2Resyncs {
		t.Errorf("site2's resyncs on A: %s before the deposal, %s after", site2Resyncs, got)
	}
	if after := pbxView(ad.extensions("?pbx=site2")); !slices.Equal(after, site2Before) {
		t.Errorf("site2's state on A changed with the default PBX's lead:\nbefore %v\nafter  %v", site2Before, after)
	}
	ad.waitExtensions("the default PBX's call on A after B's takeover", func(m map[string]restExtension) bool {
		return onlyConvOf(m["201"]).ID == dcv.ID && onlyConvOf(m["201"]).Connected
	})

	// A hangup asked on A: the default PBX's goes to B, its leader now,
	// site2's through A's own candidate. The default PBX's call is gone
	// on A (following B) and on B.
	hangupOnA := func(call *pbxsim.PhoneCall, exten, convid string) {
		t.Helper()
		if code, body := ad.do("POST", "/astproxy/hangup", `{"endpointId":"`+exten+`","convid":"`+convid+`"}`); code != http.StatusOK {
			t.Fatalf("hangup of %s asked on A: %d %s", exten, code, body)
		}
		select {
		case <-call.Done():
		case <-time.After(10 * time.Second):
			t.Fatalf("the hangup of %s asked on A did not reach the phone", exten)
		}
	}
	hangupOnA(dcall, "201", dcv.ID)
	bd := login(t, "http://"+b.api, "admin", "pw")
	for name, c := range map[string]*apiClient{"A": ad, "B": bd} {
		c.waitExtensions("the default PBX's call gone on "+name, func(m map[string]restExtension) bool {
			return len(m["201"].Conversations)+len(m["202"].Conversations) == 0 && onlyConvOf(m["site2:201"]).Connected
		})
	}
	if st := ad.status(); st.PBX != "live" || st.PBXs["default"].PBX != "live" || st.PBXs["site2"].PBX != "live" {
		t.Errorf("A's status after the deposal: %+v", st)
	}
	hangupOnA(scall, "site2:201", scv.ID)
	ad.waitExtensions("site2's call gone on A", func(m map[string]restExtension) bool {
		return len(m["site2:201"].Conversations) == 0
	})
}

// watchLeadMove reads c's pbxStatus events until PBX moving is live
// again (its lead moved) and returns the states it said; PBX steady must
// say live throughout. each sees every message first.
func watchLeadMove(ctx context.Context, t *testing.T, c *ws.Client, moving, steady string, each func(ws.Message)) []string {
	t.Helper()
	var states []string
	for len(states) == 0 || states[len(states)-1] != "live" {
		m, err := c.Next(ctx)
		if err != nil {
			t.Fatalf("the WebSocket while %s's lead moved (it said %v): %v", moving, states, err)
		}
		if each != nil {
			each(m)
		}
		if m.Op != "event" || m.Type != "pbxStatus" {
			continue
		}
		var st struct {
			PBXs map[string]struct{ PBX string }
		}
		json.Unmarshal(m.Data, &st)
		if s := st.PBXs[steady].PBX; s != "live" {
			t.Fatalf("PBX %s said %q while %s's lead moved: %s", steady, s, moving, m.Data)
		}
		states = append(states, st.PBXs[moving].PBX)
	}
	return states
}

// callOnEach calls 202 from 201 on the default PBX def and on s2.
func callOnEach(ctx context.Context, t *testing.T, def, s2 *simSite) (dcall, scall *pbxsim.PhoneCall) {
	t.Helper()
	var err error
	if dcall, err = def.phones["201"].Call(ctx, "202"); err != nil {
		t.Fatal(err)
	}
	if scall, err = s2.phones["201"].Call(ctx, "202"); err != nil {
		t.Fatal(err)
	}
	return dcall, scall
}
