package loadtest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestSpreadNearestRank(t *testing.T) {
	var ds []time.Duration
	for i := 20; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Second)
	}
	ds = append(ds, -1) // a kill not taken over has no time
	s := spreadOf(ds)
	if s.N != 20 || s.P50 != 10*time.Second || s.P90 != 18*time.Second || s.P99 != 20*time.Second || s.Max != 20*time.Second {
		t.Errorf("spread of 1..20 s: %+v, want n 20, p50 10 s, p90 18 s, p99 and max 20 s", s)
	}
	if s := spreadOf([]time.Duration{-1}); s.N != 0 || s.P99 != -1 {
		t.Errorf("spread of nothing: %+v", s)
	}
}

// TestLeaseTakenAfter: a renewal the dead leader sent just before its
// kill is no takeover; the standby's write is; the killed bridge taking
// the lease back counts only once it was restarted.
func TestLeaseTakenAfter(t *testing.T) {
	t0 := time.Now()
	l := &leaseWatch{changes: []leaseAt{{t0.Add(-time.Second), "bridge-a", 7}, {t0.Add(5 * time.Millisecond), "bridge-a", 8}}}
	if got := l.takenAfter(t0, "bridge-a", t0.Add(time.Second)); got.holder != "" {
		t.Errorf("the dead leader's last renewal taken for a takeover: %+v", got)
	}
	l.changes = append(l.changes, leaseAt{t0.Add(3 * time.Second), "bridge-b", 9})
	if got := l.takenAfter(t0, "bridge-a", t0.Add(time.Second)); got.holder != "bridge-b" || got.rev != 9 {
		t.Errorf("takeover: %+v, want bridge-b at rev 9", got)
	}
	l.changes = l.changes[:2]
	l.changes = append(l.changes, leaseAt{t0.Add(4 * time.Second), "bridge-a", 9})
	if got := l.takenAfter(t0, "bridge-a", t0.Add(time.Second)); got.rev != 9 {
		t.Errorf("the restarted bridge-a's takeover: %+v", got)
	}
	// Taken and given back: both holders after t0, each once.
	l.changes = append(l.changes, leaseAt{t0.Add(5 * time.Second), "bridge-b", 10}, leaseAt{t0.Add(6 * time.Second), "bridge-a", 11})
	if got := l.holdersAfter(t0); !slices.Equal(got, []string{"bridge-a", "bridge-b"}) {
		t.Errorf("holders after the kill: %v, want bridge-a, bridge-b", got)
	}
}

// TestWSViewStates: a view applies the snapshot and events it reads: the
// pbxStatus changes with their times, the extensions in a call, the seq.
func TestWSViewStates(t *testing.T) {
	v := newWSView()
	v.answered = make(chan struct{})
	t0 := time.Now()
	msg := func(at time.Duration, raw string) {
		var m wsMsg
		if err := json.Unmarshal([]byte(raw), &m); err != nil {
			t.Fatal(err)
		}
		v.apply(t0.Add(at), m)
	}
	msg(0, `{"op":"hello","epoch":"e1"}`)
	msg(0, `{"op":"snapshot","seq":10,"epoch":"e1","pbx":{"pbx":"live"},"extensions":{"201":{"exten":"201","conversations":{"c1":{}}},"202":{"exten":"202","conversations":{}}}}`)
	msg(time.Second, `{"op":"event","seq":11,"type":"pbxStatus","data":{"pbx":"stalled"}}`)
	msg(2*time.Second, `{"op":"event","seq":12,"type":"pbxStatus","data":{"pbx":"down"}}`)
	msg(3*time.Second, `{"op":"event","seq":14,"type":"extenUpdate","data":{"exten":"201","conversations":{}}}`)
	msg(3*time.Second, `{"op":"event","seq":15,"type":"extenUpdate","data":{"exten":"202","conversations":{"c2":{}}}}`)
	msg(4*time.Second, `{"op":"event","seq":16,"type":"pbxStatus","data":{"pbx":"live"}}`)
	stale, live := v.staleThenLive(t0.Add(time.Millisecond))
	if stale.state != "stalled" || !stale.at.Equal(t0.Add(time.Second)) || !live.Equal(t0.Add(4*time.Second)) {
		t.Errorf("stale %+v, live %v after t0", stale, live.Sub(t0))
	}
	if seq, answer := v.position(); seq != 16 || answer != "snapshot" || v.epoch != "e1" {
		t.Errorf("seq %d, answer %q, epoch %q", seq, answer, v.epoch)
	}
	if s := v.shown(); len(s) != 1 || !s["202"] {
		t.Errorf("shown in a call: %v, want 202 only", s)
	}
}

// TestFailoverPlan: the NATS servers' and the edges' kills alternate,
// spread evenly between the leader's.
func TestFailoverPlan(t *testing.T) {
	for _, c := range []struct {
		cfg  FailoverConfig
		want string
	}{
		{FailoverConfig{Kills: 3, NATSKills: 1, EdgeKills: 1}, "bridge nats bridge edge bridge"},
		{FailoverConfig{Kills: 2, NATSKills: 1, EdgeKills: 1}, "bridge nats bridge edge"},
		// After leader kills ceil(20j/6), j = 1..5: 4, 7, 10, 14, 17.
		{FailoverConfig{Kills: 20, NATSKills: 3, EdgeKills: 2}, "bridge bridge bridge bridge nats bridge bridge bridge edge " +
			"bridge bridge bridge nats bridge bridge bridge bridge edge bridge bridge bridge nats bridge bridge bridge"},
		{FailoverConfig{Kills: 1, NATSKills: 2}, "bridge nats nats"},
		{FailoverConfig{Kills: 2}, "bridge bridge"},
	} {
		if got := strings.Join(c.cfg.plan(), " "); got != c.want {
			t.Errorf("plan of %d/%d/%d:\n got %s\nwant %s", c.cfg.Kills, c.cfg.NATSKills, c.cfg.EdgeKills, got, c.want)
		}
	}
}

// TestLimitedViewLeaks: a limited user's view counts its own
// conversations with and without the number, and others' hidden or not
// (a number, a name, a channel name in the id).
func TestLimitedViewLeaks(t *testing.T) {
	v := newUserView([]string{"3000"})
	v.answered = make(chan struct{})
	msg := func(raw string) {
		var m wsMsg
		if err := json.Unmarshal([]byte(raw), &m); err != nil {
			t.Fatal(err)
		}
		v.apply(time.Now(), m)
	}
	msg(`{"op":"snapshot","seq":1,"epoch":"e","pbx":{"pbx":"live"},"extensions":{` +
		`"3000":{"exten":"3000","conversations":{"PJSIP/3000-01>":{"id":"PJSIP/3000-01>","counterpartNum":"3020"}}},` +
		`"3001":{"exten":"3001","conversations":{"~ab>":{"id":"~ab>","counterpartNum":""}}}}}`)
	msg(`{"op":"event","seq":2,"type":"extenUpdate","data":{"exten":"3002","conversations":{"~cd>~ef":{"id":"~cd>~ef","counterpartNum":"3021"}}}}`)
	msg(`{"op":"event","seq":3,"type":"extenUpdate","data":{"exten":"3003","conversations":{"PJSIP/3003-02>":{"id":"PJSIP/3003-02>"}}}}`)
	msg(`{"op":"event","seq":4,"type":"extenUpdate","data":{"exten":"3004","conversations":{"~gh>":{"id":"~gh>","counterpartName":"Bob"}}}}`)
	msg(`{"op":"event","seq":5,"type":"extenUpdate","data":{"exten":"3000","conversations":{"PJSIP/3000-03>":{"id":"PJSIP/3000-03>"}}}}`)
	l := v.leaked()
	if l.ownFull != 1 || l.ownBlank != 1 || l.others != 1 || l.leaked != 3 || len(l.first) != 3 {
		t.Errorf("leaks: %+v, want own 1 full 1 blank, others 1 hidden 3 leaked", l)
	}
	if a := newWSView(); a.own != nil {
		t.Error("an admin's view is limited")
	}
}

// TestLogTime: the first line stamped after t with the message and the
// words asked for.
func TestLogTime(t *testing.T) {
	path := filepath.Join(t.TempDir(), "serve.log")
	log := `time=2026-12-02T00:51:40.568Z level=INFO msg="pbx led by" component=bus node=bridge-a seq=2
not a log line
time=2026-12-02T00:51:41.100Z level=INFO msg="pbx led by" component=bus node=bridge-a seq=9
time=2026-12-02T00:51:42.250Z level=INFO msg="pbx led by" component=bus node=bridge-b seq=38
time=2026-12-02T00:51:43.000Z level=INFO msg="pbx led by" component=bus node=bridge-b seq=40
`
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if got := logTime(path, at("2026-12-02T00:51:40.568Z"), "pbx led by", "node=bridge-b"); !got.Equal(at("2026-12-02T00:51:42.250Z")) {
		t.Errorf("bridge-b led at %v", got)
	}
	if got := logTime(path, at("2026-12-02T00:51:40Z"), "pbx led by"); !got.Equal(at("2026-12-02T00:51:40.568Z")) {
		t.Errorf("first led at %v", got)
	}
	if got := logTime(path, at("2026-12-02T00:51:43Z"), "pbx led by"); !got.IsZero() {
		t.Errorf("nothing after the last line, got %v", got)
	}
	if got := logTime(filepath.Join(t.TempDir(), "none.log"), time.Time{}, "x"); !got.IsZero() {
		t.Errorf("no log: %v", got)
	}
}
