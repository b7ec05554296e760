package link_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/link"
)

// TestVoicemailCountsEveryResync: a PBX that lists no MWI devices (no
// res_mwi_devstate: endpoint_details' DeviceStateList without its MWI:
// items) and whose endpoints name no mailboxes. Every resync reads the
// counts all the same, from VoicemailUsersList answered with the bytes
// Asterisk 22 sent in mwi_voicemail (204: 1 new): the first live
// snapshot has them, and after a reconnect (a message left while the
// link was down: 2 new) the next one too; no MailboxCount is needed.
func TestVoicemailCountsEveryResync(t *testing.T) {
	srv := pbxOf(t, true)
	var devices []ami.Message
	for _, m := range answers(t, "endpoint_details.ami")["devicestatelist-12"] {
		if !strings.HasPrefix(m.Get("Device"), "MWI:") {
			devices = append(devices, m)
		}
	}
	srv.Handle("DeviceStateList", func(context.Context, *ami.Session, ami.Message) []ami.Message { return devices })
	list := answers(t, "mwi_voicemail.ami")["voicemailuserslist-6"]
	var daveNew atomic.Value
	daveNew.Store("1")
	srv.Handle("VoicemailUsersList", func(context.Context, *ami.Session, ami.Message) []ami.Message {
		out := make([]ami.Message, len(list))
		for i, m := range list {
			if m.Get("VoiceMailbox") == "204" {
				m = m.Set("NewMessageCount", daveNew.Load().(string))
			}
			out[i] = m
		}
		return out
	})
	eng, _ := runLink(t, srv, link.Config{ReconcileEvery: -1, RefreshEvery: -1})
	exts := waitLive(t, eng)
	if vm := exts["204"].Voicemail; vm == nil || vm.New != 1 {
		t.Fatalf("204 in the first live snapshot: %+v, want 1 new", vm)
	}
	if vm := exts["201"].Voicemail; vm == nil || vm.New != 0 {
		t.Errorf("201 in the first live snapshot: %+v, want 0 new", vm)
	}
	daveNew.Store("2")
	if srv.Drop() == 0 {
		t.Fatal("no session to drop")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		pbx, exts := extensions(t, eng.Snapshot())
		if vm := exts["204"].Voicemail; pbx == "live" && vm != nil && vm.New == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the reconnect: %s, 204 %+v, want 2 new", pbx, exts["204"].Voicemail)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := sent(srv, "VoicemailUsersList", "", ""); n != 2 {
		t.Errorf("VoicemailUsersList sent %d times, want one a resync", n)
	}
	if n := sent(srv, "MailboxCount", "", ""); n != 0 {
		t.Errorf("MailboxCount sent %d times: every mailbox was listed", n)
	}
}
