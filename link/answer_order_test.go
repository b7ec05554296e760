package link_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/ami/amitest"
	"github.com/ctibridge/ctibridge/link"
)

// TestLateEndpointAnswerAfterHangup is the e2e run's stuck "busy" at 500
// calls/s: a phone re-registers during a call, the engine asks its
// details, Asterisk writes "In use" in the answer, then the call hangs up
// (ExtensionStatus Idle, DeviceStateChange NOT_INUSE, live) before the
// answer's list completes. The link applies the live events at once and
// the answer when it is whole: the extension must end idle.
func TestLateEndpointAnswerAfterHangup(t *testing.T) {
	srv := pbxOf(t, true)
	ep := answers(t, "endpoint_details.ami")
	var armed atomic.Bool
	srv.Handle("PJSIPShowEndpoint", func(_ context.Context, se *ami.Session, req ami.Message) []ami.Message {
		a := answerWhere(ep, "EndpointDetail", "ObjectName", req.Get("Endpoint"))
		if a == nil || !armed.Load() || req.Get("Endpoint") != "201" {
			return a
		}
		id := req.Get("ActionID")
		last := len(a) - 1
		for _, m := range a[:last] {
			if m.Event() == "EndpointDetail" {
				m = m.Set("DeviceState", "In use")
			}
			se.Send(m.Set("ActionID", id))
		}
		se.Send(amitest.Event("Hangup", "Privilege", "call,all", "Channel", "PJSIP/201-00000001", "Uniqueid", "1.1", "Cause", "16"))
		se.Send(amitest.Event("ExtensionStatus", "Privilege", "call,all", "Exten", "201", "Context", "from-internal",
			"Hint", "PJSIP/201", "Status", "0", "StatusText", "Idle"))
		se.Send(amitest.Event("DeviceStateChange", "Privilege", "call,all", "Device", "PJSIP/201", "State", "NOT_INUSE"))
		time.Sleep(200 * time.Millisecond) // the live events are applied long before the list completes
		return a[last:]
	})
	eng, lk := runLink(t, srv, link.Config{ReconcileEvery: -1, RefreshEvery: -1})
	waitLive(t, eng)
	before := lk.Stats().Followups
	armed.Store(true)
	srv.Broadcast(amitest.Event("DeviceStateChange", "Privilege", "call,all", "Device", "PJSIP/201", "State", "INUSE"))
	srv.Broadcast(amitest.Event("ContactStatus", "Privilege", "system,all", "URI", "sip:201@127.0.0.1:5201",
		"ContactStatus", "Reachable", "AOR", "201", "EndpointName", "201", "UserAgent", "SIPp-Phone-201"))
	deadline := time.Now().Add(5 * time.Second)
	for lk.Stats().Followups == before {
		if time.Now().After(deadline) {
			t.Fatal("the PJSIPShowEndpoint the ContactStatus asks for was never answered")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, exts := extensions(t, eng.Snapshot()); exts["201"].Status != "online" {
		t.Errorf("201 after the hang-up and the late answer: %q, want online", exts["201"].Status)
	}
}
