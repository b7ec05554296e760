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
		if err := run(context.Background(), append([]string{"replay"}, args...), func(string) string { return "" }, nil, &out, &errb); err != nil {
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
