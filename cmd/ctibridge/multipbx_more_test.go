package main

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/pbxsim"
	"github.com/ctibridge/ctibridge/webhook"
	"github.com/ctibridge/ctibridge/ws"
)

// metricsOf is the admin listener's /metrics.
func metricsOf(t *testing.T, admin string) string {
	t.Helper()
	code, body := get(t, "http://"+admin+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	return body
}

// TestTwoPBXsPerPBX: what serve does per PBX with two simulated PBXs
// (SIP phones on each), over real HTTP, WebSocket and webhooks: site2's
// extensions get their users' names and cellphones from the users file
// (endpoints written site2:201); its calls reach the webhooks with "pbx"
// and qualified ids, the default PBX's without; the link metrics carry a
// pbx label; a user limited to one PBX sees that PBX's link only (REST
// status, WebSocket snapshot and pbxStatus); and while site2 is down a
// read of the default PBX (?pbx=default, a user limited to it, one of
// its extensions) does not say stale, and one of site2 does.
func TestTwoPBXsPerPBX(t *testing.T) {
	hash, err := auth.HashPassword("pw", 4)
	if err != nil {
		t.Fatal(err)
	}
	const secret = "0123456789abcdef0123"
	recv := newHookRecv(t, secret)
	hooks := writeFile(t, "webhooks.yaml", "webhooks:\n  - name: crm\n    url: "+recv.srv.URL+"\n    secret: "+secret+"\n")
	srv := serveTwoPBXs(t, "users:\n"+
		"  - {username: admin, role: admin, password_hash: \""+hash+"\"}\n"+
		"  - {username: ada, name: Ada Lovelace, password_hash: \""+hash+"\", endpoints: [\"201\"]}\n"+
		"  - {username: sam, name: Sam Sito, cellphone: \"3331234567\", password_hash: \""+hash+"\", endpoints: [\"site2:201\"]}\n"+
		"  - {username: rita, role: admin, pbxs: [site2], password_hash: \""+hash+"\"}\n"+
		"  - {username: dora, role: admin, pbxs: [default], password_hash: \""+hash+"\"}\n", "--webhooks", hooks)
	base := srv.base
	ad, sam, rita, dora := login(t, base, "admin", "pw"), login(t, base, "sam", "pw"), login(t, base, "rita", "pw"), login(t, base, "dora", "pw")

	// Names from the users file, on each PBX; no extension of site2 made
	// on the default PBX by its user's entry.
	exts := ad.waitExtensions("both PBXs' phones online", func(m map[string]restExtension) bool {
		return len(m) == 4 && m["site2:201"].Status == "online" && m["201"].Status == "online"
	})
	if got := keys(exts); !slices.Equal(got, []string{"201", "202", "site2:201", "site2:202"}) {
		t.Fatalf("extensions %v", got)
	}
	if exts["site2:201"].Name != "Sam Sito" || exts["201"].Name != "Ada Lovelace" || exts["site2:202"].Name != "Bob" {
		t.Errorf("names: site2:201 %q, 201 %q, site2:202 %q", exts["site2:201"].Name, exts["201"].Name, exts["site2:202"].Name)
	}

	// Link metrics per PBX.
	m := metricsOf(t, srv.admin)
	for _, want := range []string{`ctibridge_ami_connected{pbx="default"} 1`, `ctibridge_ami_connected{pbx="site2"} 1`,
		`ctibridge_ready{pbx="default"} 1`, `ctibridge_ready{pbx="site2"} 1`, `ctibridge_resyncs_total{pbx="site2"} 1`} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(m, "\nctibridge_ami_connected ") {
		t.Error("/metrics has an unlabelled ctibridge_ami_connected beside the per-PBX ones")
	}

	// Each limited user sees its PBX's link only.
	for who, c := range map[string]*apiClient{"rita": rita, "dora": dora} {
		want := map[string]string{"rita": "site2", "dora": "default"}[who]
		if st := c.status(); st.PBX != "live" || !slices.Equal(keys(st.PBXs), []string{want}) {
			t.Errorf("%s's status %+v, want %s's link only", who, st, want)
		}
	}
	if st := ad.status(); !slices.Equal(keys(st.PBXs), []string{"default", "site2"}) {
		t.Errorf("admin's status %+v", st)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dial := func(c *apiClient, topics ...string) (*ws.Client, ws.Message) {
		t.Helper()
		wc, err := ws.Dial(ctx, "ws://"+srv.api+"/ws", c.token)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { wc.Close() })
		wc.Next(ctx) // hello
		if err := wc.Subscribe(topics...); err != nil {
			t.Fatal(err)
		}
		snap, err := wc.Next(ctx)
		if err != nil || snap.Op != "snapshot" {
			t.Fatalf("snapshot %+v %v", snap, err)
		}
		return wc, snap
	}
	rc, snap := dial(rita, "extensions")
	if st := string(snap.PBX); snap.Stale || !strings.Contains(st, `"site2":`) || strings.Contains(st, `"default":`) {
		t.Errorf("rita's snapshot status %s stale=%v", st, snap.Stale)
	}
	dc, _ := dial(dora, "extensions")
	pc, _ := dial(ad, "presence")

	// A call on site2, then one on the default PBX: site2's webhook
	// events carry pbx and qualified ids, the default PBX's none.
	call, err := srv.b.phones["201"].Call(ctx, "202")
	if err != nil {
		t.Fatal(err)
	}
	ring := recv.wait(t, "site2:202 ringing", func(e webhook.Event) bool { return e.Type == webhook.TypeRinging && e.Extension == "site2:202" })
	if e := ring.e; e.PBX != "site2" || !strings.HasPrefix(e.LinkedID, "site2:") || !strings.HasPrefix(e.UniqueID, "site2:") || e.Number != "201" ||
		!strings.Contains(ring.body, `"pbx":"site2"`) {
		t.Errorf("site2's ringing %s", ring.body)
	}
	// sam's own conversations, by PBX.
	ad.waitExtensions("site2's call", func(m map[string]restExtension) bool { return len(m["site2:201"].Conversations) == 1 })
	for q, want := range map[string][]string{"": {"site2:201"}, "?pbx=site2": {"site2:201"}, "?pbx=default": nil} {
		code, body := sam.do("GET", "/astproxy/conversations"+q, "")
		var convs map[string]json.RawMessage
		if code != http.StatusOK || json.Unmarshal([]byte(body), &convs) != nil || !slices.Equal(keys(convs), want) {
			t.Errorf("sam's conversations%s: %d %s, want %v", q, code, body, want)
		}
	}
	call.Hangup(ctx)
	recv.wait(t, "site2:201 hangup", func(e webhook.Event) bool {
		return e.Type == webhook.TypeHangup && e.Extension == "site2:201" && e.PBX == "site2"
	})
	cdr := recv.wait(t, "site2's cdr", func(e webhook.Event) bool {
		return e.Type == webhook.TypeCDR && strings.HasPrefix(e.UniqueID, "site2:")
	})
	if cdr.e.PBX != "site2" || cdr.e.CDR == nil || cdr.e.CDR.Src != "site2:201" {
		t.Errorf("site2's cdr %s", cdr.body)
	}
	// sam's history has the call, its callee named by site2's extension,
	// internal.
	day := time.Now()
	hpath := "/historycall/interval/user/sam/" + day.AddDate(0, 0, -1).Format("20060102") + "/" + day.AddDate(0, 0, 1).Format("20060102")
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, body := sam.do("GET", hpath, "")
		var page struct {
			Rows []struct {
				Src, Dst, Direction string
				DstCNAM             string `json:"dst_cnam"`
			}
		}
		json.Unmarshal([]byte(body), &page)
		if len(page.Rows) > 0 {
			if r := page.Rows[0]; r.Src != "site2:201" || r.Dst != "site2:202" || r.DstCNAM != "Bob" || r.Direction != "internal" {
				t.Errorf("sam's history %s", body)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sam's history stays empty: %s", body)
		}
	}
	dcall, err := srv.a.phones["201"].Call(ctx, "202")
	if err != nil {
		t.Fatal(err)
	}
	ring = recv.wait(t, "202 ringing", func(e webhook.Event) bool { return e.Type == webhook.TypeRinging && e.Extension == "202" })
	if strings.Contains(ring.body, `"pbx"`) || strings.Contains(ring.body, "site2") {
		t.Errorf("the default PBX's ringing %s", ring.body)
	}
	dcall.Hangup(ctx)
	cdr = recv.wait(t, "the default PBX's cdr", func(e webhook.Event) bool { return e.Type == webhook.TypeCDR && e.CDR != nil && e.CDR.Src == "201" })
	if strings.Contains(cdr.body, `"pbx"`) {
		t.Errorf("the default PBX's cdr %s", cdr.body)
	}

	// sam's presence "cellphone" on site2: the forward to the users
	// file's cellphone shows as cellphone, not callforward.
	if code, body := sam.do("POST", "/user/presence", `{"status":"cellphone"}`); code != http.StatusOK {
		t.Fatalf("sam's presence: %d %s", code, body)
	}
	for {
		msg, err := pc.Next(ctx)
		if err != nil {
			t.Fatalf("no presence of site2:201: %v", err)
		}
		if msg.Type == "userPresenceUpdate" && strings.Contains(string(msg.Data), `"exten":"site2:201"`) {
			if !strings.Contains(string(msg.Data), `"status":"cellphone"`) {
				t.Errorf("site2:201's presence %s, want cellphone", msg.Data)
			}
			break
		}
	}

	// site2 goes down.
	srv.b.halt()
	deadline := time.Now().Add(15 * time.Second)
	for st := ad.status(); st.PBXs["site2"].PBX != "down"; st = ad.status() {
		if time.Now().After(deadline) {
			t.Fatalf("site2 never down: %+v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, c := range []struct {
		who   *apiClient
		path  string
		stale bool
	}{
		{ad, "/astproxy/extensions", true},
		{ad, "/astproxy/extensions?pbx=site2", true},
		{ad, "/astproxy/extensions?pbx=default", false},
		{ad, "/astproxy/extension/201", false},
		{ad, "/astproxy/extension/site2:201", true},
		{ad, "/astproxy/status?pbx=default", false},
		{dora, "/astproxy/extensions", false},
		{dora, "/astproxy/queues", false},
		{rita, "/astproxy/extensions", true},
		{sam, "/astproxy/conversations?pbx=site2", true},
	} {
		code, hdr, body := c.who.doHeader("GET", c.path, "")
		if code != http.StatusOK || (hdr.Get("X-Ctibridge-Stale") == "true") != c.stale {
			t.Errorf("GET %s: %d, X-Ctibridge-Stale %q, want stale %v: %.200s", c.path, code, hdr.Get("X-Ctibridge-Stale"), c.stale, body)
		}
	}
	if st := dora.status(); st.PBX != "live" || !slices.Equal(keys(st.PBXs), []string{"default"}) {
		t.Errorf("dora's status with site2 down %+v", st)
	}
	for {
		msg, err := rc.Next(ctx)
		if err != nil {
			t.Fatalf("rita: no pbxStatus: %v", err)
		}
		if msg.Type == "pbxStatus" && strings.Contains(string(msg.Data), `"site2":{"pbx":"down"`) {
			if strings.Contains(string(msg.Data), `"default"`) || !strings.HasPrefix(string(msg.Data), `{"pbx":"down"`) {
				t.Errorf("rita's pbxStatus %s", msg.Data)
			}
			break
		}
	}
	// dora got no word of site2's link: her next event is a change of
	// her own PBX's (a call).
	answered := make(chan *pbxsim.PhoneCall, 1)
	go func() {
		c, err := srv.a.phones["201"].Call(ctx, "202")
		if err != nil {
			t.Error(err)
		}
		answered <- c
	}()
	for {
		msg, err := dc.Next(ctx)
		if err != nil {
			t.Fatalf("dora: %v", err)
		}
		if msg.Op != "event" {
			continue
		}
		if msg.Type == "pbxStatus" || strings.Contains(string(msg.Data), "site2") {
			t.Fatalf("dora got %s %s", msg.Type, msg.Data)
		}
		break
	}
	// The call ends before the PBXs stop (a PBX stopped while a phone
	// rings may crash sipgo's CANCEL: hangUp).
	if c := <-answered; c != nil {
		hangUp(t, c)
	}
	m = metricsOf(t, srv.admin)
	for _, want := range []string{`ctibridge_ami_connected{pbx="default"} 1`, `ctibridge_ami_connected{pbx="site2"} 0`, `ctibridge_ready{pbx="site2"} 0`} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics with site2 down lacks %s", want)
		}
	}
}
