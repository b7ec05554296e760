package calls

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
)

// mutate returns a disordered copy of msgs: events shuffled inside windows,
// some duplicated, maybe cut short.
func mutate(r *rand.Rand, msgs []ami.Message) []ami.Message {
	out := append([]ami.Message(nil), msgs...)
	if r.IntN(3) == 0 {
		out = out[:r.IntN(len(out)+1)] // truncation: a prefix
	}
	w := 1 + r.IntN(8)
	for i := 0; i < len(out); i += w {
		end := min(i+w, len(out))
		r.Shuffle(end-i, func(a, b int) { out[i+a], out[i+b] = out[i+b], out[i+a] })
	}
	for n := r.IntN(len(out)/10 + 1); n > 0 && len(out) > 0; n-- {
		j := r.IntN(len(out))
		k := min(len(out), j+r.IntN(20))
		out = append(out[:k], append([]ami.Message{out[j]}, out[k:]...)...)
	}
	return out
}

// TestDisorderedRecordings: whatever the order, duplication or truncation,
// the engine never panics, and once every Hangup has been seen no
// conversation, waiting caller or parked call refers to a hung-up channel.
func TestDisorderedRecordings(t *testing.T) {
	for _, name := range scenarios {
		rec := loadRecording(t, name)
		var hangups []ami.Message
		hungUp := map[string]bool{}
		hungUpNames := map[string]bool{}
		for _, m := range rec.msgs {
			if m.Event() == "Hangup" {
				hangups = append(hangups, m)
				hungUp[m.Get("Uniqueid")] = true
				hungUpNames[m.Get("Channel")] = true
			}
		}
		for seed := range uint64(12) {
			t.Run(fmt.Sprintf("%s/%d", name, seed), func(t *testing.T) {
				r := rand.New(rand.NewPCG(seed, 7))
				msgs := mutate(r, rec.msgs)
				var clk StreamClock
				e := New(testConfig(clk.Now))
				batch := 1 + r.IntN(64)
				for i, m := range msgs {
					clk.Observe(m)
					e.Apply(m)
					if i%batch == 0 {
						e.Publish()
					}
				}
				for _, m := range hangups {
					e.Apply(m)
				}
				s := e.Publish()
				for k, x := range s.Extensions.All() {
					for id, cv := range x.Conversations {
						if hungUp[cv.UniqueID] {
							t.Errorf("extension %s keeps conversation %s of hung-up channel %s", k, id, cv.UniqueID)
						}
					}
				}
				for k, x := range s.Trunks.All() {
					for id, cv := range x.Conversations.All() {
						if hungUp[cv.UniqueID] {
							t.Errorf("trunk %s keeps conversation %s of hung-up channel %s", k, id, cv.UniqueID)
						}
					}
				}
				for k, q := range s.Queues.All() {
					for ch := range q.WaitingCallers {
						if hungUpNames[ch] {
							t.Errorf("queue %s keeps hung-up caller %s", k, ch)
						}
					}
				}
				for k, p := range s.Parkings {
					if p.ParkedCaller != nil && hungUpNames[p.ParkedCaller.Channel] {
						t.Errorf("parking %s keeps hung-up %s", k, p.ParkedCaller.Channel)
					}
				}
				if len(e.chans) != 0 {
					t.Errorf("%d channels left after every Hangup", len(e.chans))
				}
			})
		}
	}
}

// TestOutOfOrderCounted: a Hangup before its Newchannel, events for unknown
// channels and duplicates are counted, and the late Newchannel does not
// create a ghost.
func TestOutOfOrderCounted(t *testing.T) {
	rec := loadRecording(t, "basic_call_caller_hangup")
	e := New(testConfig((&fakeClock{t: time.Unix(1796028440, 0)}).Now))
	hang := findMsg(t, rec, "Hangup", "PJSIP/202-00000001")
	e.Apply(hang) // before anything
	for _, m := range rec.msgs {
		e.Apply(m)
		if m.Event() == "BridgeEnter" {
			e.Apply(m) // duplicate
		}
	}
	s := e.Publish()
	st := e.Stats()
	if st.Unknown == 0 {
		t.Error("out-of-order events not counted")
	}
	if len(s.Extensions.Get("202").Conversations) != 0 || len(s.Extensions.Get("201").Conversations) != 0 {
		t.Errorf("ghosts: %v %v", s.Extensions.Get("201").Conversations, s.Extensions.Get("202").Conversations)
	}
	// Garbage never panics.
	for _, m := range []ami.Message{
		{},
		ami.NewMessage([]ami.Header{{Key: "Event", Value: "Newchannel"}}...),
		ami.NewMessage([]ami.Header{{Key: "Event", Value: "BridgeEnter"}, {Key: "Uniqueid", Value: "x"}}...),
		ami.NewMessage([]ami.Header{{Key: "Event", Value: "DialBegin"}, {Key: "DestChannel", Value: "PJSIP/9"}}...),
		ami.NewMessage([]ami.Header{{Key: "Event", Value: "Parkinglot"}, {Key: "StartSpace", Value: "1"}, {Key: "StopSpace", Value: "99999999"}}...),
		ami.NewMessage([]ami.Header{{Key: "Event", Value: "ExtensionStatus"}, {Key: "Exten", Value: "2\"01"}, {Key: "Status", Value: "zz"}}...),
		ami.NewMessage([]ami.Header{{Key: "Event", Value: "QueueMember"}, {Key: "Queue", Value: "q\x00"}, {Key: "Location", Value: "/"}}...),
		ami.NewMessage([]ami.Header{{Key: "Event", Value: "ParkedCall"}, {Key: "ParkingSpace", Value: "7\xff"}}...),
	} {
		e.Apply(m)
		e.Publish()
	}
}
