package pbxsim

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
)

// confSequences is endpointEvents with ConfbridgeLeave taken out and
// counted apart: app_confbridge posts it asynchronously, so a real
// Asterisk puts it before or after the leaver's HangupRequest/BridgeLeave
// from one participant to the next (confbridge_actions shows both).
func confSequences(msgs []ami.Message) map[string][]string {
	out := map[string][]string{}
	for ep, seq := range endpointEvents(msgs) {
		n := 0
		out[ep] = slices.DeleteFunc(slices.Clone(seq), func(e string) bool {
			if e == "ConfbridgeLeave" {
				n++
				return true
			}
			return false
		})
		out[ep] = append(out[ep], fmt.Sprintf("ConfbridgeLeave x%d", n))
	}
	return out
}

func confAnswers(msgs []ami.Message) []string {
	var out []string
	for _, m := range msgs {
		switch {
		case m.Response() != "":
			out = append(out, m.ActionID()+" "+m.Response()+" "+m.Get("Message"))
		case m.Event() == "ConfbridgeListRooms":
			out = append(out, fmt.Sprintf("%s room %s parties=%s locked=%s", m.ActionID(), m.Get("Conference"), m.Get("Parties"), m.Get("Locked")))
		case m.Event() == "ConfbridgeList":
			ep, _, _ := strings.Cut(m.Get("Channel"), "-")
			out = append(out, fmt.Sprintf("%s user %s muted=%s", m.ActionID(), ep, m.Get("Muted")))
		}
	}
	return out
}

// TestProofConfbridgeActions drives confbridge_actions: three phones in
// room 1000, listed, Bob muted and unmuted, the room locked, Carol kicked,
// unlocked, then Alice and Bob leave.
func TestProofConfbridgeActions(t *testing.T) {
	p := startPBX(t, Config{})
	ph := map[string]*Phone{}
	for _, x := range []string{"201", "202", "203"} {
		ph[x] = startPhone(t, p, PhoneConfig{Exten: x})
	}
	capt := startCapture(t, p.AMIAddr())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	calls := map[string]*PhoneCall{}
	chans := map[string]string{}
	for _, x := range []string{"201", "202", "203"} {
		c, err := ph[x].Call(ctx, "800")
		if err != nil {
			t.Fatal(err)
		}
		calls[x] = c
		msgs := capt.waitFor(t, "join "+x, func(m []ami.Message) bool { return count(m, "ConfbridgeJoin", "CallerIDNum", x) == 1 })
		for _, m := range msgs {
			if m.Event() == "ConfbridgeJoin" && m.Get("CallerIDNum") == x {
				chans[x] = m.Get("Channel")
			}
		}
	}
	var answers []ami.Message
	do := func(kv ...string) {
		t.Helper()
		res, _ := capt.cli.Do(ctx, ami.NewAction(kv[0], kv[1:]...))
		answers = append(append(answers, res.Message), res.Items...)
	}
	do("ConfbridgeListRooms", "ActionID", "confbridgelistrooms-2")
	do("ConfbridgeList", "ActionID", "confbridgelist-3", "Conference", "1000")
	do("ConfbridgeMute", "ActionID", "confbridgemute-4", "Conference", "1000", "Channel", chans["202"])
	do("ConfbridgeList", "ActionID", "confbridgelist-5", "Conference", "1000")
	do("ConfbridgeUnmute", "ActionID", "confbridgeunmute-6", "Conference", "1000", "Channel", chans["202"])
	do("ConfbridgeLock", "ActionID", "confbridgelock-7", "Conference", "1000")
	do("ConfbridgeListRooms", "ActionID", "confbridgelistrooms-8")
	do("ConfbridgeKick", "ActionID", "confbridgekick-9", "Conference", "1000", "Channel", chans["203"])
	select {
	case <-calls["203"].Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the kicked phone got no BYE")
	}
	capt.waitFor(t, "kicked", func(m []ami.Message) bool { return count(m, "Hangup", "CallerIDNum", "203") == 1 })
	do("ConfbridgeList", "ActionID", "confbridgelist-10", "Conference", "1000")
	do("ConfbridgeUnlock", "ActionID", "confbridgeunlock-11", "Conference", "1000")
	do("ConfbridgeListRooms", "ActionID", "confbridgelistrooms-12")
	calls["201"].Hangup(ctx)
	capt.waitFor(t, "Alice out", func(m []ami.Message) bool { return count(m, "Hangup", "CallerIDNum", "201") == 1 })
	calls["202"].Hangup(ctx)
	waitNoChannels(t, p)
	capt.waitFor(t, "room ended", func(m []ami.Message) bool { return count(m, "ConfbridgeEnd") == 1 })
	do("ConfbridgeListRooms", "ActionID", "confbridgelistrooms-13")

	rec := readRecording(t, "confbridge_actions")
	var recAnswers []ami.Message
	for _, m := range rec {
		if id := m.ActionID(); strings.HasPrefix(id, "confbridge") {
			recAnswers = append(recAnswers, m)
		}
	}
	if w, g := confAnswers(recAnswers), confAnswers(answers); !reflect.DeepEqual(w, g) {
		t.Errorf("answers differ:\nrecording: %q\npbxsim:    %q", w, g)
	}
	// pbxsim makes 3 of the recording's 5 Hangups (no Local channels).
	got := capt.hints(t, rec, capt.waitFor(t, "hangups", func(m []ami.Message) bool { return count(m, "Hangup") == 3 }))
	checkHeaders(t, rec, got)
	checkStates(t, "confbridge_actions", rec, got, []checkpoint{{"ConfbridgeMute", 1}, {"ConfbridgeLeave", 1}})
	if w, g := confSequences(rec), confSequences(got); !reflect.DeepEqual(w, g) {
		t.Errorf("per-endpoint event sequences differ:\nrecording: %v\npbxsim:    %v", w, g)
	}
}

// TestProofConfbridge3Party drives confbridge_3_party: Alice, Bob and
// Carol join 800 two seconds apart (here: one after the other), Bob is
// muted and unmuted, they leave in reverse order.
func TestProofConfbridge3Party(t *testing.T) {
	p := startPBX(t, Config{})
	capt := startCapture(t, p.AMIAddr())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var calls []*PhoneCall
	var bob string
	for _, x := range []string{"201", "202", "203"} {
		c, err := startPhone(t, p, PhoneConfig{Exten: x}).Call(ctx, "800")
		if err != nil {
			t.Fatal(err)
		}
		calls = append(calls, c)
		msgs := capt.waitFor(t, "join", func(m []ami.Message) bool { return count(m, "ConfbridgeJoin", "CallerIDNum", x) == 1 })
		for _, m := range msgs {
			if m.Event() == "ConfbridgeJoin" && x == "202" {
				bob = m.Get("Channel")
			}
		}
	}
	for _, a := range []string{"ConfbridgeMute", "ConfbridgeUnmute"} {
		if _, err := capt.cli.Do(ctx, ami.NewAction(a, "Conference", "1000", "Channel", bob)); err != nil {
			t.Fatal(err)
		}
	}
	for i := 2; i >= 0; i-- {
		calls[i].Hangup(ctx)
		capt.waitFor(t, "leave", func(m []ami.Message) bool { return count(m, "ConfbridgeLeave") == 3-i })
	}
	waitNoChannels(t, p)
	capt.waitFor(t, "end", func(m []ami.Message) bool { return count(m, "ConfbridgeEnd") == 1 })
	got := capt.waitFor(t, "hangups", func(m []ami.Message) bool { return count(m, "Hangup") == 3 })
	if w, g := confSequences(readRecording(t, "confbridge_3_party")), confSequences(got); !reflect.DeepEqual(w, g) {
		t.Errorf("per-endpoint event sequences differ:\nrecording: %v\npbxsim:    %v", w, g)
	}
}
