package rest

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/ami/amitest"
	"github.com/ctibridge/ctibridge/auth"
)

// replayUntil applies a recording of the real Asterisk 22 (calls/testdata)
// to the fixture's engine up to the first message whose event is ev and
// whose Channel is ch.
func (f *fixture) replayUntil(name, ev, ch string) {
	f.t.Helper()
	for _, m := range amitest.ReadRecording(f.t, "../calls/testdata/"+name+".ami") {
		f.eng.Apply(m)
		if m.Event() == ev && m.Get("Channel") == ch {
			f.eng.Publish()
			return
		}
	}
	f.t.Fatalf("%s: no %s of %s", name, ev, ch)
}

// accept makes the test PBX answer Success to the actions named.
func (f *fixture) accept(names ...string) {
	for _, n := range names {
		for range 4 {
			f.ami.Expect(n).Reply(amitest.Response("Success", "Message", "ok"))
		}
	}
}

// post sends an action and returns the AMI actions it sent.
func (f *fixture) post(t *testing.T, route, user, body string, status int) []string {
	t.Helper()
	before := len(f.sent())
	r := f.do("POST", "/astproxy/"+route, user, body)
	if r.status != status {
		t.Fatalf("%s as %s %s: %d %s, want %d", route, user, body, r.status, r.body, status)
	}
	var out []string
	for _, m := range f.sent()[before:] {
		out = append(out, headers(m))
	}
	return out
}

func wantSent(t *testing.T, route string, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, "--\n") != strings.Join(want, "--\n") {
		t.Errorf("%s sent:\n%s\nwant:\n%s", route, strings.Join(got, "--\n"), strings.Join(want, "--\n"))
	}
}

// TestConferenceReads: room 1000 of the confbridge_actions recording (201,
// 202, 203 in it) as each user sees it.
func TestConferenceReads(t *testing.T) {
	f := newFixture(t, false, nil)
	f.replayUntil("confbridge_actions", "ConfbridgeJoin", "PJSIP/203-0000000d")
	r := f.do("GET", "/astproxy/conferences", "root", "")
	var all map[string]struct {
		ID     string
		Locked bool
		Users  map[string]struct {
			ID, Name, ExtenID string
			Owner, Muted      bool
			JoinTime          int64
		}
	}
	if r.status != 200 || json.Unmarshal(r.body, &all) != nil {
		t.Fatalf("%d %s", r.status, r.body)
	}
	c := all["1000"]
	if c.ID != "1000" || c.Locked || len(c.Users) != 3 {
		t.Fatalf("room 1000: %s", r.body)
	}
	if u := c.Users["1796111447.14"]; u.ExtenID != "202" || u.Name != "Bob Bianchi" || u.Muted || u.JoinTime == 0 {
		t.Errorf("Bob: %+v", u)
	}
	if strings.Contains(string(r.body), "PJSIP/") {
		t.Errorf("channel names in the conference JSON: %s", r.body)
	}
	if r := f.do("GET", "/astproxy/conference/1000", "olga", ""); r.status != 200 || !strings.Contains(string(r.body), `"extenId":"203"`) {
		t.Errorf("operator: %d %s", r.status, r.body)
	}
	// Alice (2000) is in no conference and sees calls of her own only.
	if r := f.do("GET", "/astproxy/conferences", "alice", ""); r.status != 200 || string(r.body) != "{}" {
		t.Errorf("alice's list: %d %s", r.status, r.body)
	}
	if r := f.do("GET", "/astproxy/conference/1000", "alice", ""); r.status != 404 {
		t.Errorf("alice's read of 1000: %d %s", r.status, r.body)
	}
	if r := f.do("GET", "/astproxy/conference/1001", "root", ""); r.status != 404 {
		t.Errorf("no such room: %d %s", r.status, r.body)
	}
}

// TestConferenceActions: each action's AMI, on room 1000 of the recording
// and on Alice's own conference (room 2000), with the permission checks.
func TestConferenceActions(t *testing.T) {
	ref := &refresher{}
	f := newFixture(t, true, func(c *Config) { c.Refresh = ref })
	f.accept("ConfbridgeMute", "ConfbridgeUnmute", "ConfbridgeKick", "ConfbridgeLock", "ConfbridgeUnlock")
	f.replayUntil("confbridge_actions", "ConfbridgeJoin", "PJSIP/203-0000000d")
	bob := `{"confId":"1000","userId":"1796111447.14"}`
	wantSent(t, "mute_userconf", f.post(t, "mute_userconf", "root", bob, 200),
		"Action: ConfbridgeMute\nConference: 1000\nChannel: PJSIP/202-0000000c\n")
	f.post(t, "unmute_userconf", "root", bob, 409) // not muted
	f.post(t, "mute_userconf", "alice", bob, 403)  // not her room
	f.post(t, "mute_userconf", "root", `{"confId":"1000","userId":"nobody"}`, 404)
	f.post(t, "mute_userconf", "root", `{"confId":"1000\r\nAction: Logoff","userId":"x"}`, 400)
	wantSent(t, "hangup_userconf", f.post(t, "hangup_userconf", "root", `{"confId":"1000","userId":"1796111448.15"}`, 200),
		"Action: ConfbridgeKick\nConference: 1000\nChannel: PJSIP/203-0000000d\n")
	wantSent(t, "lock_conf", f.post(t, "lock_conf", "root", `{"confId":"1000","lock":true}`, 200),
		"Action: ConfbridgeLock\nConference: 1000\n")
	wantSent(t, "lock_conf", f.post(t, "lock_conf", "root", `{"confId":"1000","lock":false}`, 200),
		"Action: ConfbridgeUnlock\nConference: 1000\n")
	f.post(t, "lock_conf", "root", `{"confId":"1000"}`, 400)
	// No event says a room was locked: each lock_conf reads the rooms back.
	if got := ref.taken(); len(got) != 2 || !strings.HasPrefix(got[0], "ConfbridgeListRooms") || !strings.HasPrefix(got[1], "ConfbridgeListRooms") {
		t.Errorf("refreshes after lock_conf: %q", got)
	}
	wantSent(t, "end_conf", f.post(t, "end_conf", "root", `{"endpointId":"1000"}`, 200),
		"Action: ConfbridgeKick\nConference: 1000\nChannel: all\n")

	// Alice's own conference: room 2000, empty so far.
	wantSent(t, "start_conf", f.post(t, "start_conf", "alice", `{"addEndpointId":"2001"}`, 200),
		"Action: Originate\nChannel: PJSIP/2000\nApplication: ConfBridge\nData: 2000\nCallerID: 2000\nAccount: 2000\nTimeout: 30000\nAsync: true\n",
		"Action: Originate\nChannel: PJSIP/2001\nApplication: ConfBridge\nData: 2000\nCallerID: 2000\nAccount: 2000\nTimeout: 30000\nAsync: true\n")
	wantSent(t, "join_myconf", f.post(t, "join_myconf", "alice", `{}`, 200),
		"Action: Originate\nChannel: PJSIP/2000\nApplication: ConfBridge\nData: 2000\nCallerID: 2000\nAccount: 2000\nTimeout: 30000\nAsync: true\n")
	f.post(t, "start_conf", "alice", `{"endpointId":"2001","addEndpointId":"2002"}`, 403) // Bob's room
	f.post(t, "start_conf", "alice", `{"addEndpointId":"2999"}`, 404)
	f.post(t, "start_conf", "alice", `{"addEndpointId":"2000"}`, 400)
	f.post(t, "end_conf", "alice", `{}`, 404) // nobody in room 2000
	f.post(t, "lock_conf", "bob", `{"confId":"1000","lock":true}`, 403)
}

// TestAtxferActions: the consult moment of the atxfer_complete recording
// (Alice 201 consults Carol 203 while Bob 202 waits).
func TestAtxferActions(t *testing.T) {
	f := newFixture(t, true, nil)
	f.replayUntil("atxfer_complete", "BridgeEnter", "Local/203@from-internal-00000002;2")
	held := `{"convid":"PJSIP/201-00000015>PJSIP/202-00000016","endpointId":"201"}`
	consult := `{"convid":"PJSIP/201-00000015>PJSIP/203-00000017","endpointId":"201"}`
	for _, body := range []string{held, consult} {
		wantSent(t, "atxfer_complete", f.post(t, "atxfer_complete", "root", body, 200),
			"Action: Hangup\nChannel: PJSIP/201-00000015\nCause: 16\n")
		wantSent(t, "atxfer_cancel", f.post(t, "atxfer_cancel", "root", body, 200),
			"Action: Hangup\nChannel: Local/203@from-internal-00000002;1\nCause: 16\n")
	}
	// Bob is the transferee, not the transferer.
	f.post(t, "atxfer_complete", "root", `{"convid":"PJSIP/201-00000015>PJSIP/202-00000016","endpointId":"202"}`, 409)
	// A call that is no transfer.
	f.post(t, "atxfer_cancel", "root", `{"convid":"`+conv2000+`","endpointId":"2000"}`, 409)
	f.post(t, "atxfer_complete", "alice", consult, 403)
}

// TestAtxferCancelWhileRinging: atxfer_complete while Carol's phone (203)
// rings (moment 2 of its .md): atxfer_cancel, on either of Alice's calls,
// hangs up the consult's leg (Local/203@from-internal-00000002;1, whose
// other half dials Carol), never Carol's channel: her dialplan would take
// that for no answer and send the consult to her voicemail.
func TestAtxferCancelWhileRinging(t *testing.T) {
	f := newFixture(t, true, nil)
	f.replayUntil("atxfer_complete", "Newstate", "PJSIP/203-00000017")
	held := `{"convid":"PJSIP/201-00000015>PJSIP/202-00000016","endpointId":"201"}`
	consult := `{"convid":"PJSIP/201-00000015>PJSIP/203-00000017","endpointId":"201"}`
	for _, body := range []string{held, consult} {
		sent := f.post(t, "atxfer_cancel", "root", body, 200)
		for _, a := range sent {
			if strings.Contains(a, "PJSIP/203-00000017") {
				t.Errorf("atxfer_cancel %s sent %q: Carol's channel", body, a)
			}
		}
		wantSent(t, "atxfer_cancel", sent, "Action: Hangup\nChannel: Local/203@from-internal-00000002;1\nCause: 16\n")
	}
}

// TestAtxferAfterRestart: the bridge restarts during atxfer_complete's
// consultation while Carol (203) rings; the resync lists (CoreShowChannels,
// written from the recording's channels and bridges) are all it knows.
// atxfer_complete and atxfer_cancel work on Alice's held call as before
// the restart: 200, the transferer's channel and the consult's Local leg.
func TestAtxferAfterRestart(t *testing.T) {
	f := newFixture(t, true, nil)
	f.eng.Restart(f.eng.Publish().Seq + 1)
	f.eng.BeginResync()
	item := func(name, uid, state, cid, app, bridge string) ami.Message {
		return amitest.Event("CoreShowChannel", "ActionID", "csc-1", "Channel", name, "ChannelState", state,
			"CallerIDNum", cid, "Context", "from-internal", "Exten", "203", "Priority", "1", "Uniqueid", uid,
			"Linkedid", "1796111575.25", "Application", app, "Duration", "00:00:06", "BridgeId", bridge)
	}
	const held, cons = "9b7a85c4-596e-404f-8fb1-ea2182bd159e", "550aafc6-e5e5-498e-808e-6d631cab44ed"
	for _, m := range []ami.Message{
		item("PJSIP/201-00000015", "1796111575.25", "6", "201", "Dial", cons),
		item("PJSIP/202-00000016", "1796111575.26", "6", "202", "AppDial", held),
		item("Local/203@from-internal-00000002;1", "1796111580.27", "5", "203", "", cons),
		item("Local/203@from-internal-00000002;2", "1796111580.28", "5", "201", "Dial", ""),
		item("PJSIP/203-00000017", "1796111580.29", "5", "203", "AppDial", ""),
	} {
		f.eng.Apply(m)
	}
	f.eng.EndResync()
	f.eng.Publish()
	held201 := `{"convid":"PJSIP/201-00000015>PJSIP/202-00000016","endpointId":"201"}`
	wantSent(t, "atxfer_complete", f.post(t, "atxfer_complete", "root", held201, 200),
		"Action: Hangup\nChannel: PJSIP/201-00000015\nCause: 16\n")
	wantSent(t, "atxfer_cancel", f.post(t, "atxfer_cancel", "root", held201, 200),
		"Action: Hangup\nChannel: Local/203@from-internal-00000002;1\nCause: 16\n")
}

// TestPickupQueueCaller: the caller waiting in queue 401 goes to 2007.
func TestPickupQueueCaller(t *testing.T) {
	f := newFixture(t, true, nil)
	var ch string
	for k := range f.eng.Snapshot().Queues.Get("401").WaitingCallers {
		ch = k
	}
	if ch == "" {
		t.Fatal("no waiting caller in 401")
	}
	body := func(dest string) string {
		b, _ := json.Marshal(map[string]string{"queue": "401", "channel": ch, "destId": dest})
		return string(b)
	}
	wantSent(t, "pickup_qwaitcaller", f.post(t, "pickup_qwaitcaller", "root", body("2007"), 200),
		"Action: Redirect\nChannel: "+ch+"\nContext: from-internal\nExten: 2007\nPriority: 1\n")
	f.post(t, "pickup_qwaitcaller", "alice", body("2007"), 403)
	// The channel as a filtered view shows it is accepted back.
	opaque, _ := json.Marshal(map[string]string{"queue": "401", "channel": auth.OpaqueChannel(ch), "destId": "2007"})
	wantSent(t, "pickup_qwaitcaller", f.post(t, "pickup_qwaitcaller", "root", string(opaque), 200),
		"Action: Redirect\nChannel: "+ch+"\nContext: from-internal\nExten: 2007\nPriority: 1\n")
	f.post(t, "pickup_qwaitcaller", "root", `{"queue":"401","channel":"PJSIP/none-1","destId":"2007"}`, 409)
	f.post(t, "pickup_qwaitcaller", "root", `{"queue":"499","channel":"x","destId":"2007"}`, 404)
}

// TestPickupQueueCallerByNumber: in the recorded queue_answered the caller
// dials 600 and waits in app_queue's "support"; pickup_qwaitcaller takes
// the number as the other queue routes do (queueId, /astproxy/queue/600).
func TestPickupQueueCallerByNumber(t *testing.T) {
	f := newFixture(t, true, nil)
	for _, m := range amitest.ReadRecording(t, "../ami/testdata/queue_answered.ami") {
		f.eng.Apply(m)
		if m.Event() == "QueueCallerJoin" { // stop while the caller waits
			break
		}
	}
	f.eng.Publish()
	const ch = "PJSIP/trunk-0000000a"
	if _, ok := f.eng.Snapshot().Queues.Get("support").WaitingCallers[ch]; !ok {
		t.Fatal("no caller waiting in support")
	}
	for _, queue := range []string{"support", "600"} {
		wantSent(t, "pickup_qwaitcaller", f.post(t, "pickup_qwaitcaller", "root", `{"queue":"`+queue+`","channel":"`+ch+`","destId":"2007"}`, 200),
			"Action: Redirect\nChannel: "+ch+"\nContext: from-internal\nExten: 2007\nPriority: 1\n")
	}
	f.post(t, "pickup_qwaitcaller", "root", `{"queue":"601","channel":"`+ch+`","destId":"2007"}`, 404)
}

// TestVoicemailConversationActions: in mwi_voicemail Alice's call is
// answered by Dave's mailbox; its conversation "PJSIP/201-00000018>"
// names no channel of Dave's (his phone's hung up): hangup ends Alice's
// channel, park has no party to park (409), never a channel that is gone.
func TestVoicemailConversationActions(t *testing.T) {
	f := newFixture(t, true, nil)
	for _, m := range amitest.ReadRecording(t, "../ami/testdata/mwi_voicemail.ami") {
		f.eng.Apply(m)
		f.eng.Publish()
		if m.Event() == "Hangup" && m.Get("Channel") == "PJSIP/204-00000019" {
			break
		}
	}
	const conv = `{"convid":"PJSIP/201-00000018>","endpointId":"201"}`
	f.post(t, "park", "root", conv, 409)
	wantSent(t, "hangup", f.post(t, "hangup", "root", conv, 200), "Action: Hangup\nChannel: PJSIP/201-00000018\nCause: 16\n")
}
