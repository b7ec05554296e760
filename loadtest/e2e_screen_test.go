package loadtest

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func extenUpdate(seq int, exten, status string) []byte {
	// About the size of a real one (1 KB: names, numbers, a conversation).
	pad := strings.Repeat("x", 800)
	return fmt.Appendf(nil, `{"op":"event","seq":%d,"type":"extenUpdate","at":1764600000000,"data":{"exten":%q,"status":%q,"name":%q,"conversations":{"c1":{"connected":true}}}}`, seq, exten, status, pad)
}

// TestScreenDecodesOnce: screens share one decode per message; a message
// with the same seq but other bytes (another user's view) is decoded for
// itself, not taken for the first.
func TestScreenDecodesOnce(t *testing.T) {
	dec := &decoded{m: map[string]decodedUpdate{}}
	a := &screen{byExt: map[string][]observation{}, dec: dec}
	b := &screen{byExt: map[string][]observation{}, dec: dec}
	now := time.Now()
	a.add(now, extenUpdate(7, "3001", "ringing"))
	b.add(now, extenUpdate(7, "3001", "ringing"))
	b.add(now, extenUpdate(7, "3002", "busy"))
	a.add(now, []byte(`{"op":"event","seq":8,"type":"other","at":1}`))
	if len(dec.m) != 3 {
		t.Errorf("%d decodes cached, want 3", len(dec.m))
	}
	if o := a.byExt["3001"]; len(o) != 1 || o[0].status != "ringing" || !o[0].connected || o[0].convs != 1 {
		t.Errorf("screen a: %+v", a.byExt)
	}
	if o := b.byExt["3002"]; len(o) != 1 || o[0].status != "busy" || len(b.byExt["3001"]) != 1 {
		t.Errorf("screen b: %+v", b.byExt)
	}
}

// BenchmarkScreenAdd: what each screen does with each extension update
// read, the decode shared with the other screens.
func BenchmarkScreenAdd(b *testing.B) {
	dec := &decoded{m: map[string]decodedUpdate{}}
	msg := extenUpdate(12345, "3001", "ringing")
	s := &screen{byExt: map[string][]observation{}, dec: dec}
	s.add(time.Now(), msg)
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		s.byExt["3001"] = s.byExt["3001"][:0]
		s.add(now, msg)
	}
}
