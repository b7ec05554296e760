package ami

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// eventsNotRecorded are the event constants no recording in testdata holds,
// each with why the name is still Asterisk 22's.
var eventsNotRecorded = map[string]string{
	"ChanSpyStart":      "app_chanspy; the recordings have no ChanSpy call",
	"ChanSpyStop":       "app_chanspy; the recordings have no ChanSpy call",
	"MixMonitorStart":   "app_mixmonitor; the recordings record no call",
	"MixMonitorStop":    "app_mixmonitor; the recordings record no call",
	"MixMonitorMute":    "app_mixmonitor; the recordings record no call",
	"Pickup":            "features pickup (*8); the recordings have no pickup",
	"BlindTransfer":     "stasis bridging; blind_transfer_redirect uses Redirect, which raises none",
	"UserEvent":         "the dialplan's UserEvent(); the recorded dialplan raises none",
	"ConfbridgeTalking": "needs talk detection (TALK_DETECT or a talker option), off in the recorded bridge profile",
	"ConfbridgeLock":    "ConfbridgeLock action; not exercised in confbridge_3_party",
	"ConfbridgeUnlock":  "ConfbridgeUnlock action; not exercised in confbridge_3_party",
	"Registry":          "outbound registration (res_pjsip_outbound_registration); the recorded trunk does not register",
	"DBGetTreeResponse": "DBGetTree action (Asterisk 18+); call_forward_astdb uses DBGet",
	"DBGetTreeComplete": "DBGetTree action (Asterisk 18+); call_forward_astdb uses DBGet",
	"QueueMemberPaused": "pre-12 name of QueueMemberPause, still matched for old peers",
	"AgentRingNoAnswer": "app_queue ring timeout; queue_answered's member answers",
	"ParkedCallGiveUp":  "res_parking; park_retrieve's parked caller does not hang up",
	"ParkedCallTimeOut": "res_parking; park_retrieve's call is retrieved before the timeout",
	"ParkedCallSwap":    "res_parking; no recording swaps a parked call",
	"Shutdown":          "sent when Asterisk stops; no recording covers a restart",
}

// nameConsts parses names.go and returns its string constants whose names
// start with prefix, by Go name, with their values.
func nameConsts(t *testing.T, prefix string) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "names.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			for i, n := range vs.Names {
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING || !strings.HasPrefix(n.Name, prefix) {
					continue
				}
				v, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatal(err)
				}
				out[n.Name] = v
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("no %s constants in names.go", prefix)
	}
	return out
}

// TestEventNames checks every Event constant against the recordings of
// Asterisk 22 in testdata: its value occurs as "Event: <value>" in one of
// them, or it is in eventsNotRecorded with a reason.
func TestEventNames(t *testing.T) {
	recorded := map[string]bool{}
	files, _ := filepath.Glob("testdata/*.ami")
	if len(files) == 0 {
		t.Fatal("no recordings in testdata")
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(strings.TrimRight(line, "\r"), "Event: "); ok {
				recorded[v] = true
			}
		}
	}
	consts := nameConsts(t, "Event")
	values := map[string]bool{}
	for name, v := range consts {
		values[v] = true
		if name != "Event"+v {
			t.Errorf("%s = %q: the Go name is not Event+value", name, v)
		}
		_, allowed := eventsNotRecorded[v]
		switch {
		case recorded[v] && allowed:
			t.Errorf("%s = %q is recorded now: drop it from eventsNotRecorded", name, v)
		case !recorded[v] && !allowed:
			t.Errorf("%s = %q occurs in no recording and is not in eventsNotRecorded", name, v)
		}
	}
	for v := range eventsNotRecorded {
		if !values[v] {
			t.Errorf("eventsNotRecorded lists %q, which is no constant", v)
		}
	}
}

// TestActionNames checks that each Action constant's Go name is Action
// followed by its value, so a grep for the Asterisk name finds both. The
// recordings hold only what Asterisk sends, never an action.
func TestActionNames(t *testing.T) {
	for name, v := range nameConsts(t, "Action") {
		if name != "Action"+v {
			t.Errorf("%s = %q: the Go name is not Action+value", name, v)
		}
	}
}
