package main

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
)

// replay prints conferences beside extensions, queues, parkings and
// trunks: room 1000 of confbridge_actions holds three members after
// message 60 (all joined, Bob unmuted again) and none at the end.
func TestReplayConferences(t *testing.T) {
	rooms := func(args ...string) map[string]struct {
		Users map[string]struct{ ExtenID string }
	} {
		var out, errb bytes.Buffer
		if err := run(context.Background(), append([]string{"replay"}, args...), sysIO{func(string) string { return "" }, nil, &out, &errb}); err != nil {
			t.Fatalf("replay %v: %v\n%s", args, err, errb.String())
		}
		var st struct {
			Conferences map[string]struct {
				Users map[string]struct{ ExtenID string }
			} `json:"conferences"`
		}
		if err := json.Unmarshal(out.Bytes(), &st); err != nil || st.Conferences == nil {
			t.Fatalf("replay %v: no conferences (%v): %s", args, err, out.String())
		}
		return st.Conferences
	}
	const file = "../../calls/testdata/confbridge_actions.ami"
	if c := rooms(file, "--at", "60"); len(c["1000"].Users) != 3 {
		t.Errorf("at message 60: %+v", c)
	}
	if c := rooms(file); len(c) != 0 {
		t.Errorf("at the end: %+v", c)
	}
}

// The issue's own check: replay attended_transfer_atxfer up to Carol
// answering Bob's consult (message 131, a batch boundary apart from any
// Publish). Bob keeps his held call with Alice and calls Carol (out).
func TestReplayAtxferConsult(t *testing.T) {
	var out, errb bytes.Buffer
	if err := run(context.Background(), []string{"replay", "../../ami/testdata/attended_transfer_atxfer.ami", "--at", "131"}, sysIO{func(string) string { return "" }, nil, &out, &errb}); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	var st struct {
		Extensions map[string]struct {
			Conversations map[string]struct {
				Direction, CounterpartNum string
				Transfer                  struct{ State, Role string }
			}
		}
	}
	if err := json.Unmarshal(out.Bytes(), &st); err != nil {
		t.Fatal(err)
	}
	bob := st.Extensions["202"].Conversations
	held, consult := bob["PJSIP/201-0000001b>PJSIP/202-0000001c"], bob["PJSIP/202-0000001c>PJSIP/203-0000001d"]
	if len(bob) != 2 || held.CounterpartNum != "201" || held.Direction != "in" ||
		consult.CounterpartNum != "203" || consult.Direction != "out" || consult.Transfer.Role != "transferer" || consult.Transfer.State != "consulting" {
		t.Errorf("Bob's conversations at the consult: %+v", bob)
	}
}
