package pbxsim

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
	"github.com/ctibridge/ctibridge/rest"
)

// restBridge is the REST API of ctibridge in front of a pbxsim, as `ctibridge
// serve` wires it: the AMI client's events feed calls.Engine (here, a
// fresh engine per snapshot from everything captured), rest sends the
// actions over AMI.
type restBridge struct {
	t     *testing.T
	p     *PBX
	capt  *capture
	srv   *httptest.Server
	token string
}

// liveState rebuilds the engine from the captured stream at each
// snapshot.
type liveState struct{ capt *capture }

func (s liveState) Snapshot() *calls.Snapshot {
	eng := calls.New(calls.Config{Names: defaultNames})
	eng.SetLink(calls.LinkLive)
	for _, m := range s.capt.all() {
		eng.Apply(m)
	}
	return eng.Publish()
}

func startBridge(t *testing.T, p *PBX) *restBridge {
	t.Helper()
	return startBridgeWith(t, p, nil)
}

// startBridgeWith is startBridge with more of rest's settings (mod).
func startBridgeWith(t *testing.T, p *PBX, mod func(*rest.Config)) *restBridge {
	t.Helper()
	h, _ := bcrypt.GenerateFromPassword([]byte("secret"), bcrypt.MinCost)
	users, err := auth.NewUsers([]auth.User{{Username: "root", Name: "Root", PasswordHash: string(h), Role: auth.RoleAdmin}})
	if err != nil {
		t.Fatal(err)
	}
	svc := auth.NewService(users, auth.Config{})
	capt := startCapture(t, p.AMIAddr())
	cfg := rest.Config{Auth: svc, State: liveState{capt}, PBX: capt.cli, AccessLogEvery: -1}
	if mod != nil {
		mod(&cfg)
	}
	handler, err := rest.NewHandler(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	tok, _, err := svc.Tokens().Issue("root")
	if err != nil {
		t.Fatal(err)
	}
	return &restBridge{t: t, p: p, capt: capt, srv: srv, token: tok}
}

// post runs one REST action and fails the test unless it answers 200.
func (b *restBridge) post(action, body string) {
	b.t.Helper()
	req, _ := http.NewRequest("POST", b.srv.URL+"/astproxy/"+action, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+b.token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		b.t.Fatalf("%s %s: %d %s", action, body, res.StatusCode, out)
	}
}

// ext is an extension as a panel sees it.
type panelExt struct {
	Status        string `json:"status"`
	DND           bool   `json:"dnd"`
	Conversations map[string]struct {
		Counterpart string `json:"counterpartNum"`
		Connected   bool   `json:"connected"`
		Recording   string `json:"recording"`
		Direction   string `json:"direction"`
	} `json:"conversations"`
}

func (b *restBridge) state() (exts map[string]panelExt, queues map[string]struct {
	Members map[string]struct {
		Paused bool `json:"paused"`
	} `json:"members"`
}) {
	var st struct {
		Extensions map[string]panelExt `json:"extensions"`
		Queues     map[string]struct {
			Members map[string]struct {
				Paused bool `json:"paused"`
			} `json:"members"`
		} `json:"queues"`
	}
	if err := json.Unmarshal(liveState{b.capt}.Snapshot().StateJSON(), &st); err != nil {
		b.t.Fatal(err)
	}
	return st.Extensions, st.Queues
}

// waitState waits until ok holds for the extensions a panel shows.
func (b *restBridge) waitState(what string, ok func(map[string]panelExt) bool) {
	b.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		exts, _ := b.state()
		if ok(exts) {
			return
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("%s: never reached; extensions now %+v", what, exts)
		}
		time.Sleep(30 * time.Millisecond)
	}
}

// talking reports whether x has a connected conversation with y.
func talking(exts map[string]panelExt, x, y string) bool {
	for _, c := range exts[x].Conversations {
		if c.Connected && c.Counterpart == y {
			return true
		}
	}
	return false
}

func convOf(exts map[string]panelExt, x string) string {
	for id := range exts[x].Conversations {
		return id
	}
	return ""
}

func idle(exts map[string]panelExt, xs ...string) bool {
	for _, x := range xs {
		if len(exts[x].Conversations) > 0 {
			return false
		}
	}
	return true
}

// TestRESTActionsThroughBridge runs each REST action of the bridge against
// pbxsim and checks what a panel then shows, as it would on a real PBX.
func TestRESTActionsThroughBridge(t *testing.T) {
	p := startPBX(t, Config{QueueMembers: []string{"203", "204"}})
	ph := map[string]*Phone{}
	for _, x := range []string{"201", "202", "203", "204", "205"} {
		ph[x] = startPhone(t, p, PhoneConfig{Exten: x, RingTime: 100 * time.Millisecond})
	}
	startPhone(t, p, PhoneConfig{Exten: "206", NoAnswer: true})
	b := startBridge(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// call: click-to-call 201 -> 202.
	b.post("call", `{"number":"202","endpointId":"201"}`)
	b.waitState("201 talking with 202", func(e map[string]panelExt) bool { return talking(e, "201", "202") && talking(e, "202", "201") })

	// start_record / mute / unmute / stop_record on that call.
	exts, _ := b.state()
	conv := convOf(exts, "201")
	for _, a := range []string{"start_record", "mute_record", "unmute_record", "stop_record"} {
		b.post(a, `{"convid":"`+conv+`","endpointId":"201"}`)
	}

	// start_spy and intrude by 205 on 201's call: 205 is rung and joins.
	b.post("start_spy", `{"convid":"`+conv+`","endpointId":"201","destId":"205"}`)
	b.post("intrude", `{"convid":"`+conv+`","endpointId":"201","destId":"204"}`)
	b.capt.waitFor(t, "ChanSpyStart", func(m []ami.Message) bool { return count(m, "ChanSpyStart") == 2 })

	// blindtransfer: 202 goes to 203.
	b.post("blindtransfer", `{"convid":"`+conv+`","endpointId":"201","to":"203"}`)
	b.waitState("202 with 203 after the blind transfer", func(e map[string]panelExt) bool {
		return talking(e, "202", "203") && !talking(e, "201", "202")
	})
	b.capt.waitFor(t, "the spies leave with 201", func(m []ami.Message) bool { return count(m, "ChanSpyStop") == 2 })
	b.waitState("the spies hung up", func(e map[string]panelExt) bool { return idle(e, "204", "205") })

	// atxfer: 203 consults 204, then hangs up: 202 with 204.
	exts, _ = b.state()
	conv = convOf(exts, "203")
	b.post("atxfer", `{"convid":"`+conv+`","endpointId":"203","to":"204"}`)
	b.waitState("203 consulting 204", func(e map[string]panelExt) bool { return talking(e, "204", "203") })
	b.post("hangup", `{"convid":"`+convOf(mustState(b), "203")+`","endpointId":"203"}`)
	b.waitState("202 with 204 after the attended transfer", func(e map[string]panelExt) bool { return talking(e, "202", "204") })

	// park 202's call, then pickup_parking by 201.
	exts, _ = b.state()
	b.post("park", `{"convid":"`+convOf(exts, "204")+`","endpointId":"204"}`)
	b.waitState("parked", func(e map[string]panelExt) bool { return !talking(e, "202", "204") && idle(e, "204") })
	b.post("pickup_parking", `{"parking":"701","destId":"201"}`)
	b.waitState("201 with the parked 202", func(e map[string]panelExt) bool { return talking(e, "201", "202") })
	b.post("hangup", `{"convid":"`+convOf(mustState(b), "201")+`","endpointId":"201"}`)
	b.waitState("all idle", func(e map[string]panelExt) bool { return idle(e, "201", "202", "203", "204", "205") })

	// pickup_conv: 205 calls 206, which rings; 201 picks it up.
	go ph["205"].Call(ctx, "206")
	b.waitState("206 ringing", func(e map[string]panelExt) bool { return e["206"].Status == "ringing" })
	b.post("pickup_conv", `{"endpointId":"206","destId":"201"}`)
	b.waitState("205 with 201 after the pickup", func(e map[string]panelExt) bool { return talking(e, "205", "201") })
	b.post("hangup", `{"convid":"`+convOf(mustState(b), "201")+`","endpointId":"201"}`)
	b.waitState("all idle", func(e map[string]panelExt) bool { return idle(e, "201", "205", "206") })

	// dnd and cfcall: the state and the routing.
	b.post("dnd", `{"endpointId":"204","activate":true}`)
	b.waitState("204 in DND", func(e map[string]panelExt) bool { return e["204"].DND })
	if _, err := ph["201"].Call(ctx, "204"); err == nil {
		t.Error("a call to 204 in DND was answered")
	}
	b.post("dnd", `{"endpointId":"204","activate":false}`)
	b.post("cfcall", `{"endpointId":"203","type":"unconditional","to":"202"}`)
	c, err := ph["201"].Call(ctx, "203")
	if err != nil {
		t.Fatal(err)
	}
	b.waitState("the call to 203 forwarded to 202", func(e map[string]panelExt) bool { return talking(e, "201", "202") })
	c.Hangup(ctx)
	b.post("cfcall", `{"endpointId":"203","type":"unconditional"}`)

	// queue members.
	_, queues := b.state()
	var qid string
	for id := range queues {
		qid = id
	}
	b.post("queuemember_add", `{"endpointId":"205","queueId":"`+qid+`"}`)
	b.post("queuemember_pause", `{"endpointId":"205","queueId":"`+qid+`","reason":"lunch"}`)
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, queues = b.state()
		if m, ok := queues[qid].Members["205"]; ok && m.Paused {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("205 not shown as a paused member of %s: %+v", qid, queues[qid])
		}
		time.Sleep(30 * time.Millisecond)
	}
	b.post("queuemember_unpause", `{"endpointId":"205","queueId":"`+qid+`"}`)
	b.post("queuemember_remove", `{"endpointId":"205","queueId":"`+qid+`"}`)
	deadline = time.Now().Add(10 * time.Second)
	for {
		_, queues = b.state()
		if _, ok := queues[qid].Members["205"]; !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("205 still a member of %s", qid)
		}
		time.Sleep(30 * time.Millisecond)
	}
	waitNoChannels(t, p)
}

func mustState(b *restBridge) map[string]panelExt {
	exts, _ := b.state()
	return exts
}
