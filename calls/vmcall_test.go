package calls

import (
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/ami/amitest"
)

// TestVoicemailAnsweredAt: in mwi_voicemail Alice's talk time with Dave's
// mailbox starts when VoiceMail answers her channel (its Newstate Up),
// 15 s after she called; her call never showed as answered before.
func TestVoicemailAnsweredAt(t *testing.T) {
	rec := loadRecording(t, "mwi_voicemail")
	times := loadTiming(t, rec)
	i := 0
	e := New(testConfig(func() time.Time { return times[i] }))
	e.SetLink(LinkLive)
	up := msgIndex(t, rec, "Newstate Channel=PJSIP/201-00000018 ChannelStateDesc=Up")
	for i = range rec.msgs[:up+1] {
		e.Apply(rec.msgs[i])
		s := e.Publish()
		for _, cv := range s.Extensions.Get("201").Conversations {
			if i < up && cv.AnsweredAt != 0 {
				t.Fatalf("after #%d: answered before VoiceMail answered: %+v", i, cv)
			}
			if i == up && (cv.AnsweredAt != times[up].UnixMilli() || !cv.Voicemail || cv.AnsweredAt-cv.StartTime < 14_000) {
				t.Errorf("at VoiceMail's answer (%d): %+v", times[up].UnixMilli(), cv)
			}
		}
	}
}

// TestVoicemailFromList: the bridge starts while Alice leaves her
// message; CoreShowChannels (the item built with the headers Asterisk
// 22 lists, as status_actions_during_call's) says her channel runs
// VoiceMail(204@default,u): her call is with the mailbox, answered, its
// talk time from the channel's start (the best bound a list gives). The
// Newexten of the dialplan going on after VoiceMail ends it.
func TestVoicemailFromList(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1796111640, 0)}
	e := New(testConfig(clk.Now))
	e.BeginResync()
	alice := []string{"ActionID", "coreshowchannels-2", "Channel", "PJSIP/201-00000018", "ChannelState", "6", "ChannelStateDesc", "Up",
		"CallerIDNum", "201", "CallerIDName", "Alice Rossi", "ConnectedLineNum", "204", "ConnectedLineName", "Dave Neri",
		"Language", "en", "AccountCode", "", "Context", "from-internal", "Exten", "204", "Priority", "13",
		"Uniqueid", "1796111620.30", "Linkedid", "1796111620.30", "Application", "VoiceMail", "ApplicationData", "204@default,u",
		"Duration", "00:00:20", "BridgeId", ""}
	e.Apply(amitest.Event("CoreShowChannel", alice...))
	e.EndResync()
	convs := e.Publish().Extensions.Get("201").Conversations
	cv, ok := convs["PJSIP/201-00000018>"]
	if !ok || len(convs) != 1 || !cv.Voicemail || !cv.Connected || cv.CounterpartNum != "204" || cv.Direction != "out" ||
		cv.AnsweredAt != clk.t.Add(-20*time.Second).UnixMilli() {
		t.Fatalf("201 from the list: %+v", convs)
	}
	e.Apply(amitest.Event("Newexten", "Channel", "PJSIP/201-00000018", "ChannelState", "6", "ChannelStateDesc", "Up",
		"CallerIDNum", "201", "Uniqueid", "1796111620.30", "Linkedid", "1796111620.30", "Application", "Hangup", "AppData", ""))
	for _, cv := range e.Publish().Extensions.Get("201").Conversations {
		if cv.Voicemail || cv.Connected {
			t.Errorf("after VoiceMail: %+v", cv)
		}
	}
	if e.inVM != 0 {
		t.Errorf("%d channels counted in VoiceMail", e.inVM)
	}
}

// BenchmarkApplyNewexten: the Newexten of the recordings (none in
// VoiceMail), each read for its application only.
func BenchmarkApplyNewexten(b *testing.B) {
	var msgs []ami.Message
	for _, m := range benchCorpus(b) {
		if m.Event() == "Newexten" {
			msgs = append(msgs, m)
		}
	}
	e := New(testConfig(time.Now))
	for _, m := range msgs { // warm Stats.ByType
		e.Apply(m)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		e.Apply(msgs[i%len(msgs)])
	}
}
