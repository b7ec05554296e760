package calls

import (
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
)

// benchCorpus is the call mix of the recordings (everything but the status
// actions one), pre-parsed.
func benchCorpus(b *testing.B) []ami.Message {
	var msgs []ami.Message
	for _, name := range scenarios {
		if name == "status_actions_during_call" {
			continue
		}
		msgs = append(msgs, loadRecording(b, name).msgs...)
	}
	return msgs
}

// BenchmarkApply replays the corpus with a Publish every 64 messages (a
// read batch), as the AMI reader loop does. A fresh engine starts each pass
// over the corpus (the recordings reuse no Uniqueid within a pass).
func BenchmarkApply(b *testing.B) {
	msgs := benchCorpus(b)
	now := time.Unix(1796028439, 0)
	clock := func() time.Time { return now }
	e := New(testConfig(clock))
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuTime()
	j := 0
	for i := range b.N {
		e.Apply(msgs[j])
		j++
		if i%64 == 63 {
			e.Publish()
		}
		if j == len(msgs) {
			j = 0
			e.Publish()
			e = New(testConfig(clock))
		}
	}
	e.Publish()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(b.N)/(cpuTime()-cpu).Seconds(), "events/cpu-s")
}

// BenchmarkApplyNoise is the hot path for events that change nothing shown.
func BenchmarkApplyNoise(b *testing.B) {
	var noise []ami.Message
	for _, m := range benchCorpus(b) {
		switch m.Event() {
		case "VarSet", "Newexten", "RTCPSent", "RTCPReceived", "Cdr":
			noise = append(noise, m)
		}
	}
	e := New(testConfig(time.Now))
	for _, m := range noise { // warm Stats.ByType
		e.Apply(m)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		e.Apply(noise[i%len(noise)])
	}
}

// BenchmarkPublish: one call event then Publish, with 10 calls up (the
// load recording at its peak): re-derive, compare, encode what changed.
func BenchmarkPublish(b *testing.B) {
	rec := loadRecording(b, "load_10_calls_5cps")
	now := time.Unix(1796028639, 0)
	e := New(testConfig(func() time.Time { return now }))
	var hold ami.Message
	for _, m := range rec.msgs {
		e.Apply(m)
		if m.Event() == "BridgeEnter" && m.Get("Channel") == "PJSIP/trunk-00000033" {
			hold = m
			break
		}
	}
	e.Publish()
	unhold := hold
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		// Alternate a DeviceStateChange so each Publish has one real change.
		st := "INUSE"
		if i%2 == 1 {
			st = "RINGINUSE"
		}
		e.Apply(ami.NewMessage([]ami.Header{{Key: "Event", Value: "DeviceStateChange"}, {Key: "Device", Value: "PJSIP/201"}, {Key: "State", Value: st}}...))
		e.Apply(unhold)
		e.Publish()
	}
}
