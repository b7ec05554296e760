package loadtest

import (
	"encoding/json"
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
	if s.N != 20 || s.P50 != 10*time.Second || s.P99 != 20*time.Second || s.Max != 20*time.Second {
		t.Errorf("spread of 1..20 s: %+v, want n 20, p50 10 s, p99 and max 20 s", s)
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
