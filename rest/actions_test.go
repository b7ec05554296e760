package rest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/ami/amitest"
	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/rest/resttest"
)

// conv2000 is extension 2000's conversation with 2001 (2000 called).
var conv2000 = resttest.Chan(0) + ">" + resttest.Chan(1)

// TestActionsSendExactAMI checks each action's AMI headers, as root.
func TestActionsSendExactAMI(t *testing.T) {
	cases := []struct {
		route, body string
		want        []string // each an action, "Key: Value\n" lines
	}{
		{"call", `{"number":"2005","endpointId":"2000"}`,
			[]string{"Action: Originate\nChannel: PJSIP/2000\nContext: from-internal\nExten: 2005\nPriority: 1\nCallerID: 2000\nAccount: 2005\nTimeout: 30000\nAsync: true\n"}},
		{"hangup", `{"convid":"` + conv2000 + `","endpointId":"2001"}`,
			[]string{"Action: Hangup\nChannel: " + resttest.Chan(1) + "\nCause: 16\n"}},
		// The id as a filtered view shows it is accepted back.
		{"hangup", `{"convid":"` + auth.OpaqueConvID(conv2000) + `","endpointId":"2001"}`,
			[]string{"Action: Hangup\nChannel: " + resttest.Chan(1) + "\nCause: 16\n"}},
		{"blindtransfer", `{"convid":"` + conv2000 + `","endpointId":"2001","to":"2009"}`,
			[]string{"Action: Redirect\nChannel: " + resttest.Chan(0) + "\nContext: from-internal\nExten: 2009\nPriority: 1\n"}},
		{"atxfer", `{"convid":"` + conv2000 + `","endpointId":"2001","to":"2009"}`,
			[]string{"Action: Atxfer\nChannel: " + resttest.Chan(1) + "\nExten: 2009\nContext: from-internal\n"}},
		{"park", `{"convid":"` + conv2000 + `","endpointId":"2001"}`,
			[]string{"Action: Park\nChannel: " + resttest.Chan(0) + "\nTimeoutChannel: " + resttest.Chan(1) + "\n"}},
		{"pickup_parking", `{"parking":"701","destId":"2007"}`,
			[]string{"Action: Originate\nChannel: PJSIP/2007\nContext: from-internal\nExten: 701\nPriority: 1\nCallerID: 2007\nAccount: 701\nTimeout: 30000\nAsync: true\n"}},
		{"start_record", `{"convid":"` + conv2000 + `","endpointId":"2000"}`,
			[]string{"Action: MixMonitor\nChannel: " + resttest.Chan(0) + "\nFile: ctibridge-20260304-101112-2000-1796028439.0.wav\n"}},
		{"start_spy", `{"convid":"` + conv2000 + `","endpointId":"2000","destId":"2008"}`,
			[]string{"Action: Originate\nChannel: PJSIP/2008\nApplication: ChanSpy\nData: " + resttest.Chan(0) + ",qE\nCallerID: 2008\nAccount: 2000\nTimeout: 30000\nAsync: true\n"}},
		{"intrude", `{"convid":"` + conv2000 + `","endpointId":"2000","destId":"2008"}`,
			[]string{"Action: Originate\nChannel: PJSIP/2008\nApplication: ChanSpy\nData: " + resttest.Chan(0) + ",qEB\nCallerID: 2008\nAccount: 2000\nTimeout: 30000\nAsync: true\n"}},
		{"whisper", `{"convid":"` + conv2000 + `","endpointId":"2000","destId":"2008"}`,
			[]string{"Action: Originate\nChannel: PJSIP/2008\nApplication: ChanSpy\nData: " + resttest.Chan(0) + ",qEw\nCallerID: 2008\nAccount: 2000\nTimeout: 30000\nAsync: true\n"}},
		{"dnd", `{"endpointId":"2007","activate":true}`, []string{"Action: DBPut\nFamily: DND\nKey: 2007\nVal: YES\n",
			"Action: Setvar\nVariable: DEVICE_STATE(Custom:DND2007)\nValue: BUSY\n"}},
		{"dnd", `{"endpointId":"2007","activate":false}`, []string{"Action: DBDel\nFamily: DND\nKey: 2007\n",
			"Action: Setvar\nVariable: DEVICE_STATE(Custom:DND2007)\nValue: NOT_INUSE\n"}},
		{"cfcall", `{"endpointId":"2007","type":"unconditional","to":"0721405516"}`, []string{"Action: DBPut\nFamily: CF\nKey: 2007\nVal: 0721405516\n"}},
		{"cfcall", `{"endpointId":"2007","type":"busy","to":"2008"}`, []string{"Action: DBPut\nFamily: CFB\nKey: 2007\nVal: 2008\n"}},
		{"cfcall", `{"endpointId":"2007","type":"unavailable"}`, []string{"Action: DBDel\nFamily: CFU\nKey: 2007\n"}},
		{"cfcall", `{"endpointId":"2007","type":"unavailable","to":""}`, []string{"Action: DBDel\nFamily: CFU\nKey: 2007\n"}},
		{"queuemember_add", `{"endpointId":"2007","queueId":"401"}`,
			[]string{"Action: QueueAdd\nQueue: 401\nInterface: PJSIP/2007\nPaused: false\nMemberName: \n"}},
		{"queuemember_remove", `{"endpointId":"2001","queueId":"401"}`, []string{"Action: QueueRemove\nQueue: 401\nInterface: PJSIP/2001\n"}},
		{"queuemember_pause", `{"endpointId":"2001","queueId":"402","reason":"lunch"}`,
			[]string{"Action: QueuePause\nInterface: PJSIP/2001\nQueue: 402\nPaused: true\nReason: lunch\n"}},
		{"queuemember_unpause", `{"endpointId":"2001","queueId":"402"}`,
			[]string{"Action: QueuePause\nInterface: PJSIP/2001\nQueue: 402\nPaused: false\n"}},
	}
	f := newFixture(t, true, nil)
	n := 0
	for _, c := range cases {
		t.Run(c.route, func(t *testing.T) {
			r := f.do("POST", "/astproxy/"+c.route, "root", c.body)
			if r.status != 200 || strings.TrimSpace(string(r.body)) != "{}" {
				t.Fatalf("%d %s", r.status, r.body)
			}
			sent := f.sent()
			if len(sent) != n+len(c.want) {
				t.Fatalf("%d actions sent, want %d", len(sent)-n, len(c.want))
			}
			for i, w := range c.want {
				if got := headers(sent[n+i]); got != w {
					t.Errorf("sent:\n%s\nwant:\n%s", got, w)
				}
			}
			n = len(sent)
		})
	}
}

// TestActionsDependingOnCallState covers the actions that need a ringing,
// recorded or parked call.
func TestActionsDependingOnCallState(t *testing.T) {
	f := newFixture(t, true, nil)
	// Recording state comes from MixMonitorStart.
	if r := f.do("POST", "/astproxy/stop_record", "root", `{"convid":"`+conv2000+`","endpointId":"2000"}`); r.status != 409 {
		t.Errorf("stop without recording: %d %s", r.status, r.body)
	}
	f.eng.Apply(amitest.Event("MixMonitorStart", "Channel", resttest.Chan(0), "Uniqueid", "1796028439.0"))
	f.eng.Publish()
	for route, want := range map[string]string{
		"stop_record":   "Action: StopMixMonitor\nChannel: " + resttest.Chan(0) + "\n",
		"mute_record":   "Action: MixMonitorMute\nChannel: " + resttest.Chan(0) + "\nDirection: both\nState: 1\n",
		"unmute_record": "Action: MixMonitorMute\nChannel: " + resttest.Chan(0) + "\nDirection: both\nState: 0\n",
	} {
		before := len(f.sent())
		r := f.do("POST", "/astproxy/"+route, "root", `{"convid":"`+conv2000+`","endpointId":"2000"}`)
		if r.status != 200 {
			t.Errorf("%s: %d %s", route, r.status, r.body)
			continue
		}
		if got := headers(f.sent()[before]); got != want {
			t.Errorf("%s sent:\n%s", route, got)
		}
	}
	if r := f.do("POST", "/astproxy/start_record", "root", `{"convid":"`+conv2000+`","endpointId":"2000"}`); r.status != 409 {
		t.Errorf("start while recording: %d %s", r.status, r.body)
	}

	// pickup_conv needs a ringing call.
	if r := f.do("POST", "/astproxy/pickup_conv", "root", `{"endpointId":"2007","destId":"2008"}`); r.status != 409 {
		t.Errorf("pickup with nothing ringing: %d %s", r.status, r.body)
	}
	ring := func(name, ch, num, uid string, state string) ami.Message {
		return amitest.Event(name, "Channel", ch, "ChannelState", state, "CallerIDNum", num, "CallerIDName", "",
			"ConnectedLineNum", "2006", "ConnectedLineName", "X", "Context", "from-internal", "Exten", "2007",
			"Uniqueid", uid, "Linkedid", "77.1")
	}
	caller, callee := "PJSIP/2006-00000077", "PJSIP/2007-00000078"
	f.eng.Apply(ring("Newchannel", caller, "2006", "77.1", "4"))
	f.eng.Apply(ring("Newchannel", callee, "2007", "77.2", "0"))
	f.eng.Apply(amitest.Event("DialBegin", "Channel", caller, "Uniqueid", "77.1", "Linkedid", "77.1",
		"DestChannel", callee, "DestUniqueid", "77.2", "DestLinkedid", "77.1", "DialString", "2007"))
	f.eng.Apply(ring("Newstate", callee, "2007", "77.2", "5"))
	f.eng.Publish()
	before := len(f.sent())
	r := f.do("POST", "/astproxy/pickup_conv", "root", `{"endpointId":"2007","destId":"2008"}`)
	if r.status != 200 {
		t.Fatalf("pickup: %d %s (2007: %s)", r.status, r.body, f.eng.Snapshot().ExtensionJSON("2007"))
	}
	want := "Action: Originate\nChannel: PJSIP/2008\nApplication: PickupChan\nData: " + callee + "\nCallerID: 2008\nAccount: 2006\nTimeout: 30000\nAsync: true\n"
	if got := headers(f.sent()[before]); got != want {
		t.Errorf("pickup sent:\n%s", got)
	}
}

// TestActionErrors: bad input and call state give 4xx and send nothing.
func TestActionErrors(t *testing.T) {
	f := newFixture(t, true, nil)
	cases := []struct {
		name, route, body string
		status            int
	}{
		{"empty body", "call", ``, 400},
		{"not an object", "call", `[1]`, 400},
		{"two objects", "call", `{"number":"2001"}{}`, 400},
		{"unknown field", "call", `{"number":"2001","endpointId":"2000","x":1}`, 400},
		{"wrong type", "call", `{"number":2001,"endpointId":"2000"}`, 400},
		{"malformed", "call", `{"number":"2001"`, 400},
		{"CRLF in number", "call", `{"number":"2001\r\nAction: Originate","endpointId":"2000"}`, 400},
		{"LF in endpoint", "hangup", `{"convid":"x","endpointId":"2000\nChannel: PJSIP/2001"}`, 400},
		{"NUL in convid", "hangup", `{"convid":"a\u0000b","endpointId":"2000"}`, 400},
		{"CR in reason", "queuemember_pause", `{"endpointId":"2001","queueId":"401","reason":"x\rAction: Logoff"}`, 400},
		{"LF in queue", "queuemember_add", `{"endpointId":"2007","queueId":"401\nx"}`, 400},
		{"number outside the dial pattern", "call", `{"number":"2001;x","endpointId":"2000"}`, 400},
		{"letters in to", "blindtransfer", `{"convid":"` + conv2000 + `","endpointId":"2001","to":"abc"}`, 400},
		{"missing endpoint for admin", "call", `{"number":"2001"}`, 400},
		{"unknown extension", "call", `{"number":"2001","endpointId":"2999"}`, 404},
		{"no such conversation", "hangup", `{"convid":"PJSIP/2000-1>PJSIP/2001-2","endpointId":"2000"}`, 409},
		{"conversation of another extension", "hangup", `{"convid":"` + conv2000 + `","endpointId":"2002"}`, 409},
		{"dnd without activate", "dnd", `{"endpointId":"2007"}`, 400},
		{"bad forward type", "cfcall", `{"endpointId":"2007","type":"always","to":"1"}`, 400},
		{"unknown queue", "queuemember_add", `{"endpointId":"2007","queueId":"499"}`, 404},
		{"already a member", "queuemember_add", `{"endpointId":"2000","queueId":"401"}`, 409},
		{"not a member", "queuemember_remove", `{"endpointId":"2007","queueId":"401"}`, 409},
		{"empty parking", "pickup_parking", `{"parking":"702","destId":"2007"}`, 409},
		{"unknown parking", "pickup_parking", `{"parking":"799","destId":"2007"}`, 404},
		{"too large", "call", `{"number":"` + strings.Repeat("1", 70<<10) + `"}`, 413},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := f.do("POST", "/astproxy/"+c.route, "root", c.body)
			if r.status != c.status {
				t.Errorf("%d %s, want %d", r.status, r.body, c.status)
			}
			var e struct {
				Error struct{ Code, Message string }
			}
			if err := json.Unmarshal(r.body, &e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
				t.Errorf("error body %s", r.body)
			}
		})
	}
	if s := f.sent(); len(s) != 0 {
		t.Errorf("actions reached the PBX: %v", s)
	}
}

// TestActionPBXErrors maps PBX failures to 502, 503 and 504.
func TestActionPBXErrors(t *testing.T) {
	// 1 s: a loaded -race run took over 100 ms to answer the refused one.
	f := newFixture(t, true, func(c *Config) { c.ActionTimeout = time.Second })
	f.ami.Expect("DBPut", "Key", "2007").Reply(amitest.Response("Error", "Message", "Failed to update entry"))
	f.ami.Expect("DBPut", "Key", "2008").Hold()
	if r := f.do("POST", "/astproxy/dnd", "root", `{"endpointId":"2007","activate":true}`); r.status != 502 || r.errorCode() != "pbx_error" {
		t.Errorf("refused: %d %s", r.status, r.body)
	}
	if r := f.do("POST", "/astproxy/dnd", "root", `{"endpointId":"2008","activate":true}`); r.status != 504 || r.errorCode() != "pbx_timeout" {
		t.Errorf("no answer: %d %s", r.status, r.body)
	}
	// DBDel of a key that is not there is what was asked for. Asterisk 22
	// refuses it as it refuses a failed delete (main/db.c); the key read
	// back tells them apart.
	f.ami.Expect("DBDel", "Key", "2007").Reply(amitest.Response("Error", "Message", "Database entry could not be deleted"))
	f.ami.Expect("DBGet", "Key", "2007").Reply(amitest.Response("Error", "Message", "Database entry not found"))
	if r := f.do("POST", "/astproxy/dnd", "root", `{"endpointId":"2007","activate":false}`); r.status != 200 {
		t.Errorf("DBDel of a missing key: %d %s", r.status, r.body)
	}
	f.ami.Expect("DBDel", "Key", "2008").Reply(amitest.Response("Error", "Message", "Database entry could not be deleted"))
	f.ami.Expect("DBGet", "Key", "2008").Reply(amitest.Response("Success", "EventList", "start", "Message", "Result will follow"),
		amitest.Event("DBGetResponse", "Family", "DND", "Key", "2008", "Val", "YES"),
		amitest.Event("DBGetComplete", "EventList", "Complete", "ListItems", "1"))
	if r := f.do("POST", "/astproxy/dnd", "root", `{"endpointId":"2008","activate":false}`); r.status != 502 || r.errorCode() != "pbx_error" {
		t.Errorf("DBDel that failed with the key still there: %d %s", r.status, r.body)
	}

	down := newFixture(t, false, func(c *Config) { c.PBX = ami.NewClient(ami.Config{Addr: "127.0.0.1:1"}) })
	if r := down.do("POST", "/astproxy/dnd", "root", `{"endpointId":"2007","activate":true}`); r.status != 503 || r.errorCode() != "pbx_down" {
		t.Errorf("link down: %d %s", r.status, r.body)
	}
	none := newFixture(t, false, nil)
	if r := none.do("POST", "/astproxy/dnd", "root", `{"endpointId":"2007","activate":true}`); r.status != 503 {
		t.Errorf("no PBX: %d %s", r.status, r.body)
	}
	// A bus node whose lease is stale (bus.ErrStaleLease) says so.
	stale := newFixture(t, false, func(c *Config) { c.PBX = stalePBX{} })
	if r := stale.do("POST", "/astproxy/dnd", "root", `{"endpointId":"2007","activate":true}`); r.status != 503 || r.errorCode() != "lease_stale" {
		t.Errorf("stale lease: %d %s", r.status, r.body)
	}
}

// stalePBX refuses every action as a bus node whose lease ran out.
type stalePBX struct{}

type staleErr struct{}

func (staleErr) Error() string           { return "bus: lease stale" }
func (staleErr) UnavailableCode() string { return "lease_stale" }

func (stalePBX) Do(context.Context, ami.Message) (ami.Response, error) {
	return ami.Response{}, fmt.Errorf("wrapped: %w", staleErr{})
}

// TestPermissionTable: every action route x every role x own/other
// endpoint. Where the answer is 403, nothing may reach the PBX.
func TestPermissionTable(t *testing.T) {
	f := newFixture(t, true, nil)
	// Each user's own endpoint (o) and one it may not touch (x); olga may
	// act on 2000 through her group, so her "other" is 2002.
	type who struct{ own, other, ownPeer, otherPeer string }
	users := map[string]who{
		"alice": {"2000", "2002", "2001", "2003"},
		"bob":   {"2001", "2002", "2000", "2003"},
		"paula": {"2006", "2002", "", "2003"},
		"olga":  {"2009", "2002", "", "2003"},
		"root":  {"2000", "2002", "2001", "2003"},
	}
	bodies := actionBodies()
	if len(bodies) != len(actions) {
		t.Fatalf("table covers %d routes of %d", len(bodies), len(actions))
	}
	for _, a := range actions {
		for name, w := range users {
			for _, target := range []string{"own", "other"} {
				ep, dest := w.own, w.own
				if target == "other" {
					ep = w.other
				}
				// The endpoint that picks up, listens or takes the parked call
				// is the user's own in every case; the target is what differs.
				if a.name == "pickup_parking" {
					dest = ep
				}
				t.Run(fmt.Sprintf("%s/%s/%s", a.name, name, target), func(t *testing.T) {
					before := len(f.sent())
					r := f.do("POST", "/astproxy/"+a.name, name, bodies[a.name](ep, dest))
					want403 := name != "root" && target == "other"
					if a.name == "pickup_parking" && name == "alice" || a.name == "pickup_parking" && name == "bob" {
						want403 = true // a plain user may not take parked calls
					}
					if want403 {
						if r.status != 403 || r.errorCode() != "forbidden" {
							t.Errorf("got %d %s, want 403", r.status, r.body)
						}
						if n := len(f.sent()) - before; n != 0 {
							t.Errorf("%d actions reached the PBX after a 403", n)
						}
					} else if r.status == 403 {
						t.Errorf("got 403 %s", r.body)
					}
				})
			}
		}
	}
	// A user's endpointId defaults to its only endpoint.
	before := len(f.sent())
	if r := f.do("POST", "/astproxy/call", "alice", `{"number":"2008"}`); r.status != 200 {
		t.Fatalf("call without endpointId: %d %s", r.status, r.body)
	}
	if got := f.sent()[before].Get("Channel"); got != "PJSIP/2000" {
		t.Errorf("called from %s", got)
	}
}

// actionBodies gives, per action route, a request body acting on
// endpoint ep (with dest the endpoint that picks up, listens or takes the
// parked call) in the synth PBX.
func actionBodies() map[string]func(ep, dest string) string {
	convOf := func(x string) string {
		for i := 0; i < 6; i++ {
			if resttest.Exten(i) == x {
				a, b := i&^1, i|1
				return resttest.Chan(a) + ">" + resttest.Chan(b)
			}
		}
		return "PJSIP/" + x + "-1>PJSIP/2999-2"
	}
	bodies := map[string]func(ep, dest string) string{
		"call":   func(ep, _ string) string { return `{"number":"2008","endpointId":"` + ep + `"}` },
		"hangup": func(ep, _ string) string { return `{"convid":"` + convOf(ep) + `","endpointId":"` + ep + `"}` },
		"blindtransfer": func(ep, _ string) string {
			return `{"convid":"` + convOf(ep) + `","endpointId":"` + ep + `","to":"2008"}`
		},
		"atxfer": func(ep, _ string) string {
			return `{"convid":"` + convOf(ep) + `","endpointId":"` + ep + `","to":"2008"}`
		},
		"park":           func(ep, _ string) string { return `{"convid":"` + convOf(ep) + `","endpointId":"` + ep + `"}` },
		"pickup_conv":    func(ep, dest string) string { return `{"endpointId":"` + ep + `","destId":"` + dest + `"}` },
		"pickup_parking": func(_, dest string) string { return `{"parking":"701","destId":"` + dest + `"}` },
		"start_record":   func(ep, _ string) string { return `{"convid":"` + convOf(ep) + `","endpointId":"` + ep + `"}` },
		"stop_record":    func(ep, _ string) string { return `{"convid":"` + convOf(ep) + `","endpointId":"` + ep + `"}` },
		"mute_record":    func(ep, _ string) string { return `{"convid":"` + convOf(ep) + `","endpointId":"` + ep + `"}` },
		"unmute_record":  func(ep, _ string) string { return `{"convid":"` + convOf(ep) + `","endpointId":"` + ep + `"}` },
		"start_spy": func(ep, dest string) string {
			return `{"convid":"` + convOf(ep) + `","endpointId":"` + ep + `","destId":"` + dest + `"}`
		},
		"intrude": func(ep, dest string) string {
			return `{"convid":"` + convOf(ep) + `","endpointId":"` + ep + `","destId":"` + dest + `"}`
		},
		"whisper": func(ep, dest string) string {
			return `{"convid":"` + convOf(ep) + `","endpointId":"` + ep + `","destId":"` + dest + `"}`
		},
		"dnd":                 func(ep, _ string) string { return `{"endpointId":"` + ep + `","activate":true}` },
		"cfcall":              func(ep, _ string) string { return `{"endpointId":"` + ep + `","type":"busy","to":"2008"}` },
		"queuemember_add":     func(ep, _ string) string { return `{"endpointId":"` + ep + `","queueId":"402"}` },
		"queuemember_remove":  func(ep, _ string) string { return `{"endpointId":"` + ep + `","queueId":"401"}` },
		"queuemember_pause":   func(ep, _ string) string { return `{"endpointId":"` + ep + `","queueId":"401"}` },
		"queuemember_unpause": func(ep, _ string) string { return `{"endpointId":"` + ep + `","queueId":"401"}` },
	}
	return bodies
}

// noter records what start_record told the history recorder.
type noter struct {
	mu    sync.Mutex
	notes []string
}

func (n *noter) NoteRecording(channel, file string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.notes = append(n.notes, channel+" "+file)
}

// TestStartRecordNotesFile: the file a start_record asked for reaches the
// history recorder (Asterisk's Cdr event does not name it).
func TestStartRecordNotesFile(t *testing.T) {
	n := &noter{}
	f := newFixture(t, true, func(c *Config) { c.Recordings = n })
	body := `{"convid":"` + conv2000 + `","endpointId":"2000"}`
	if r := f.do("POST", "/astproxy/start_record", "root", body); r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	want := resttest.Chan(0) + " ctibridge-20260304-101112-2000-1796028439.0.wav"
	if len(n.notes) != 1 || n.notes[0] != want {
		t.Errorf("noted %q, want [%q]", n.notes, want)
	}
}
