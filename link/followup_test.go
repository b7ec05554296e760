package link_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/ami/amitest"
	"github.com/ctibridge/ctibridge/calls"
	"github.com/ctibridge/ctibridge/link"
)

// answers groups a recording's answers by ActionID: the response first,
// then its list items, as Asterisk sent them.
func answers(t *testing.T, name string) map[string][]ami.Message {
	out := map[string][]ami.Message{}
	for _, m := range amitest.ReadRecording(t, "../ami/testdata/"+name) {
		if id := m.ActionID(); id != "" && !strings.HasPrefix(id, "login") {
			out[id] = append(out[id], m)
		}
	}
	return out
}

// answerWhere finds the recorded answer one of whose items is event ev
// with header k = v.
func answerWhere(rec map[string][]ami.Message, ev, k, v string) []ami.Message {
	for _, msgs := range rec {
		for _, m := range msgs {
			if m.Event() == ev && m.Get(k) == v {
				return msgs
			}
		}
	}
	return nil
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// pbxOf is a fake Asterisk answering the resync lists and the follow-ups
// with the bytes a real Asterisk 22 answered in endpoint_details and
// call_forward_astdb. withTree says whether it has DBGetTree.
func pbxOf(t *testing.T, withTree bool) *amitest.Server {
	srv := amitest.NewServer(t)
	ep := answers(t, "endpoint_details.ami")
	cf := answers(t, "call_forward_astdb.ami")
	st := answers(t, "status_actions_during_call.ami")
	serve := func(action string, get func(req ami.Message) []ami.Message) {
		srv.Handle(action, func(_ context.Context, _ *ami.Session, req ami.Message) []ami.Message { return get(req) })
	}
	for action, id := range map[string]string{"PJSIPShowEndpoints": "pjsipshowendpoints-2", "PJSIPShowContacts": "pjsipshowcontacts-9",
		"ExtensionStateList": "extensionstatelist-11", "DeviceStateList": "devicestatelist-12"} {
		serve(action, func(ami.Message) []ami.Message { return ep[id] })
	}
	for _, l := range [][2]string{{"CoreShowChannels", "CoreShowChannelsComplete"}, {"QueueStatus", "QueueStatusComplete"}, {"ParkedCalls", "ParkedCallsComplete"}} {
		listReply(srv, l[0], l[1])
	}
	serve("Parkinglots", func(ami.Message) []ami.Message { return st["parkinglots-15"] })
	serve("PJSIPShowEndpoint", func(req ami.Message) []ami.Message {
		if a := answerWhere(ep, "EndpointDetail", "ObjectName", req.Get("Endpoint")); a != nil {
			return a
		}
		return []ami.Message{amitest.Response("Error", "Message", "Unable to retrieve endpoint "+req.Get("Endpoint"))}
	})
	// DBGet CF/201 answers as recorded (202); everything else is "not found", as dbget-5 was.
	notFound := cf["dbget-5"]
	serve("DBGet", func(req ami.Message) []ami.Message {
		if req.Get("Family") == "CF" && req.Get("Key") == "201" {
			return cf["dbget-3"]
		}
		return notFound
	})
	if withTree {
		serve("DBGetTree", func(req ami.Message) []ami.Message {
			out := []ami.Message{amitest.Response("Success", "EventList", "start", "Message", "Result will follow")}
			if req.Get("Family") == "CF" {
				out = append(out, amitest.Event("DBGetTreeResponse", "Key", "/CF/201", "Val", "202"))
			}
			if req.Get("Family") == "AMPUSER" {
				out = append(out, amitest.Event("DBGetTreeResponse", "Key", "/AMPUSER/202/cidname", "Val", "Roberto Bianchi"),
					amitest.Event("DBGetTreeResponse", "Key", "/AMPUSER/202/outboundcid", "Val", "x"))
			}
			return append(out, amitest.Event("DBGetTreeComplete", "EventList", "Complete"))
		})
	}
	return srv
}

type extState struct {
	Name      string `json:"name"`
	Status    string `json:"status"`
	CF        string `json:"cf"`
	UA        string `json:"sipuseragent"`
	Voicemail *struct {
		New int `json:"new"`
	} `json:"voicemail"`
}

func extensions(t *testing.T, s *calls.Snapshot) (string, map[string]extState) {
	var st struct {
		PBX        struct{ PBX string } `json:"pbx"`
		Extensions map[string]extState  `json:"extensions"`
	}
	if err := json.Unmarshal(s.StateJSON(), &st); err != nil {
		t.Fatal(err)
	}
	return st.PBX.PBX, st.Extensions
}

func runLink(t *testing.T, srv *amitest.Server, cfg link.Config) (*calls.Engine, *link.Link) {
	client := ami.NewClient(srv.ClientConfig())
	eng := calls.New(calls.Config{Trunks: []string{"trunk"}})
	lk := link.New(client, eng, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { client.Run(ctx) })
	wg.Go(func() { lk.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	return eng, lk
}

// waitLive returns the first live snapshot's extensions.
func waitLive(t *testing.T, eng *calls.Engine) map[string]extState {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if pbx, exts := extensions(t, eng.Snapshot()); pbx == "live" {
			return exts
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatal("link never live")
	return nil
}

func sent(srv *amitest.Server, action, k, v string) int {
	n := 0
	for _, a := range srv.Actions() {
		if a.Action() == action && (k == "" || a.Get(k) == v) {
			n++
		}
	}
	return n
}

// TestFollowupsBeforeLive: the first live snapshot already has what the
// follow-ups read: every endpoint's name (205 never registered), the
// AstDB forward, FreePBX's AMPUSER name overriding the callerid.
func TestFollowupsBeforeLive(t *testing.T) {
	srv := pbxOf(t, true)
	eng, lk := runLink(t, srv, link.Config{ReconcileEvery: -1, RefreshEvery: -1})
	exts := waitLive(t, eng)
	for ext, name := range map[string]string{"201": "Alice Rossi", "202": "Roberto Bianchi", "203": "Carol Verdi", "204": "Dave Neri", "205": "Eve Bruno"} {
		if exts[ext].Name != name {
			t.Errorf("%s: name %q in the first live snapshot, want %q", ext, exts[ext].Name, name)
		}
	}
	if exts["205"].Status != "offline" || exts["201"].CF != "202" || exts["201"].UA != "SIPp-Phone-201" {
		t.Errorf("first live snapshot: 205 %+v, 201 %+v", exts["205"], exts["201"])
	}
	for _, ep := range []string{"201", "202", "203", "204", "205"} {
		if sent(srv, "PJSIPShowEndpoint", "Endpoint", ep) == 0 {
			t.Errorf("PJSIPShowEndpoint %s never sent", ep)
		}
	}
	if sent(srv, "PJSIPShowEndpoint", "Endpoint", "trunk") != 0 {
		t.Error("the trunk was detailed as an extension")
	}
	for _, fam := range []string{"CF", "CFB", "CFU", "DND", "AMPUSER"} {
		if sent(srv, "DBGetTree", "Family", fam) != 1 {
			t.Errorf("DBGetTree %s sent %d times", fam, sent(srv, "DBGetTree", "Family", fam))
		}
	}
	if sent(srv, "DBGet", "", "") != 0 {
		t.Error("DBGet sent although the PBX has DBGetTree")
	}
	// Every configured parking space (lot default, 701-720) is listed, free.
	var st struct {
		Parkings map[string]struct {
			Timeout      int `json:"timeout"`
			ParkedCaller any `json:"parkedCaller"`
		} `json:"parkings"`
	}
	json.Unmarshal(eng.Snapshot().StateJSON(), &st)
	if p := st.Parkings["720"]; len(st.Parkings) != 20 || p.Timeout != 45 || p.ParkedCaller != nil {
		t.Errorf("parkings: %d spaces, 720 %+v", len(st.Parkings), p)
	}
	// Mailboxes: DeviceStateList listed MWI:201@default..204: each counted.
	if n := sent(srv, "MailboxCount", "", ""); n != 4 {
		t.Errorf("MailboxCount sent %d times, want 4", n)
	}

	// A forward changed behind our back is read again on Refresh.
	if !lk.Refresh(calls.ForwardRefresh("203")...) {
		t.Fatal("Refresh refused")
	}
	srv.WaitAction("DBGet", 4)
}

// TestNoDBGetTreeDegrades: a PBX without DBGetTree is read key by key with
// DBGet, says so in one log line however many refreshes follow, and the
// resync is not retried.
func TestNoDBGetTreeDegrades(t *testing.T) {
	srv := pbxOf(t, false)
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	eng := calls.New(calls.Config{Trunks: []string{"trunk"}, Log: log})
	client := ami.NewClient(srv.ClientConfig())
	lk := link.New(client, eng, link.Config{ReconcileEvery: -1, RefreshEvery: 20 * time.Millisecond, Log: log})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { client.Run(ctx) })
	wg.Go(func() { lk.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })

	exts := waitLive(t, eng)
	if exts["201"].CF != "202" || exts["202"].CF != "" || exts["201"].Name != "Alice Rossi" {
		t.Errorf("first live snapshot without DBGetTree: 201 %+v, 202 %+v", exts["201"], exts["202"])
	}
	// Let a few refreshes run: once refused, DBGetTree is not asked again
	// until the next resync; DBGet per extension is.
	srv.Wait(func(as []ami.Message) bool {
		n := 0
		for _, a := range as {
			if a.Action() == "DBGet" && a.Get("Family") == "DND" && a.Get("Key") == "201" {
				n++
			}
		}
		return n >= 3
	})
	if n := strings.Count(logs.String(), "action=DBGetTree"); n != 1 {
		t.Errorf("%d log lines about the missing DBGetTree, want 1:\n%s", n, logs.String())
	}
	if n := sent(srv, "DBGetTree", "", ""); n != 6 {
		t.Errorf("DBGetTree sent %d times, want the 6 families of the one resync", n)
	}
	if st := lk.Stats(); st.Resyncs != 1 || st.ResyncFailures != 0 {
		t.Errorf("resyncs %d, failures %d: want 1 and 0", st.Resyncs, st.ResyncFailures)
	}
}

// TestRefreshFindsNewEndpoint: an endpoint configured while the bridge
// runs (205 here, missing from the first list) shows, named, after the
// periodic refresh, with no AMI event about it.
func TestRefreshFindsNewEndpoint(t *testing.T) {
	srv := pbxOf(t, true)
	ep := answers(t, "endpoint_details.ami")
	var mu sync.Mutex
	listed := 0
	srv.Handle("PJSIPShowEndpoints", func(context.Context, *ami.Session, ami.Message) []ami.Message {
		mu.Lock()
		defer mu.Unlock()
		listed++
		if listed > 1 {
			return ep["pjsipshowendpoints-2"]
		}
		var out []ami.Message
		for _, m := range ep["pjsipshowendpoints-2"] {
			if m.Get("ObjectName") != "205" {
				out = append(out, m)
			}
		}
		return out
	})
	eng, _ := runLink(t, srv, link.Config{ReconcileEvery: -1, RefreshEvery: 20 * time.Millisecond})
	if exts := waitLive(t, eng); exts["205"].Name != "" {
		t.Fatalf("205 known before it was listed: %+v", exts["205"])
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, exts := extensions(t, eng.Snapshot())
		if x := exts["205"]; x.Name == "Eve Bruno" && x.Status == "offline" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("205 never appeared named: %+v", exts["205"])
		}
		time.Sleep(5 * time.Millisecond)
	}
}
