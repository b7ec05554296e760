package shape

import (
	"encoding/json"
	"testing"
)

// TestParkingTimeLeft: a parked caller's timeout is the seconds left
// (the space's 45 s less the 12 s parked: 33, then 0 once past).
func TestParkingTimeLeft(t *testing.T) {
	p := map[string]any{"parking": "701", "timeout": json.Number("45"),
		"parkedCaller": map[string]any{"num": "0612345678", "parkedAt": json.Number("1796028600000")}}
	Parking(p, 1796028612)
	if pc := p["parkedCaller"].(map[string]any); pc["timeout"] != int64(33) || pc["parking"] != "701" {
		t.Errorf("after 12 s: %v", pc)
	}
	Parking(p, 1796028700)
	if pc := p["parkedCaller"].(map[string]any); pc["timeout"] != int64(0) {
		t.Errorf("past the timeout: %v", pc)
	}
	free := map[string]any{"parking": "702", "timeout": json.Number("45"), "parkedCaller": nil}
	Parking(free, 1796028612)
	if pc, ok := free["parkedCaller"].(map[string]any); !ok || len(pc) != 0 {
		t.Errorf("a free space's parkedCaller %v, want {}", free["parkedCaller"])
	}
}

// BenchmarkQueue: one queue change reshaped, as the socket does once per
// class (decode, names added, encode).
func BenchmarkQueue(b *testing.B) {
	q := []byte(`{"queue":"support","name":"support","number":"400","members":{"201":{"member":"201","name":"Alice","type":"static","paused":false,"pausedReason":"","loggedIn":true,"callsTaken":3,"lastCall":0,"lastPause":0,"loginTime":1796111254000}},"waitingCallers":{"1":{"channel":"PJSIP/trunk-1","num":"0612345678","name":"","position":1,"waitingSince":1796111254000}},"completed":4,"abandoned":1,"holdTime":12,"talkTime":80,"serviceLevel":60,"completedInServiceLevel":3,"abandonedInServiceLevel":0}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Object(q, Queue); err != nil {
			b.Fatal(err)
		}
	}
}
