package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type replayState struct {
	PBX struct {
		PBX   string `json:"pbx"`
		Since int64  `json:"since"`
	} `json:"pbx"`
	Extensions map[string]struct {
		Status        string                     `json:"status"`
		Conversations map[string]json.RawMessage `json:"conversations"`
	} `json:"extensions"`
	Queues   map[string]json.RawMessage `json:"queues"`
	Parkings map[string]json.RawMessage `json:"parkings"`
	Trunks   map[string]json.RawMessage `json:"trunks"`
}

func runReplay(t *testing.T, args ...string) (replayState, string) {
	t.Helper()
	var out, errb bytes.Buffer
	if err := run(context.Background(), append([]string{"replay"}, args...), sysIO{func(string) string { return "" }, nil, &out, &errb}); err != nil {
		t.Fatalf("replay %v: %v\n%s", args, err, errb.String())
	}
	var st replayState
	if err := json.Unmarshal(out.Bytes(), &st); err != nil {
		t.Fatalf("replay %v printed invalid JSON: %v\n%s", args, err, out.String())
	}
	return st, errb.String()
}

// Every recording replays to a state where every call has ended, and the
// same file always prints the same bytes.
func TestReplayRecordings(t *testing.T) {
	files, _ := filepath.Glob("../../ami/testdata/*.ami")
	if len(files) == 0 {
		t.Fatal("no recordings")
	}
	// The third set: a FreePBX-style dialplan (Local channels, devices).
	for _, n := range []string{"multi_device_user", "ringgroup_local", "queue_local_members", "park_by_transfer"} {
		files = append(files, "../../calls/testdata/"+n+".ami")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			st, _ := runReplay(t, f)
			if st.PBX.PBX != "live" || st.PBX.Since <= 0 {
				t.Errorf("pbx = %+v, want live since the recording's start", st.PBX)
			}
			if len(st.Extensions) == 0 {
				t.Error("no extensions")
			}
			for ext, e := range st.Extensions {
				if len(e.Conversations) != 0 {
					t.Errorf("extension %s still has %d conversations at the end", ext, len(e.Conversations))
				}
			}
			var a, b bytes.Buffer
			run(context.Background(), []string{"replay", f}, sysIO{func(string) string { return "" }, nil, &a, &bytes.Buffer{}})
			run(context.Background(), []string{"replay", f}, sysIO{func(string) string { return "" }, nil, &b, &bytes.Buffer{}})
			if !bytes.Equal(a.Bytes(), b.Bytes()) {
				t.Error("two replays of the same file differ")
			}
		})
	}
}

// --at stops in the middle: message 30 of the basic call is Bob's phone
// ringing for Alice (see basic_call_caller_hangup.timing).
func TestReplayAt(t *testing.T) {
	st, _ := runReplay(t, "../../ami/testdata/basic_call_caller_hangup.ami", "--at", "30")
	if got := st.Extensions["202"].Status; got != "ringing" {
		t.Errorf("202 status = %q, want ringing", got)
	}
	if n := len(st.Extensions["201"].Conversations); n != 1 {
		t.Errorf("201 has %d conversations, want 1", n)
	}
}

// A recording cut in the middle of a frame (a crash, a full disk) still
// replays up to the cut, and says where it stopped.
func TestReplayTruncated(t *testing.T) {
	data, err := os.ReadFile("../../ami/testdata/basic_call_caller_hangup.ami")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "cut.ami")
	os.WriteFile(p, data[:len(data)/2+7], 0o600)
	st, stderr := runReplay(t, p)
	if !strings.Contains(stderr, "stopped after message") {
		t.Errorf("stderr = %q, want a note about the cut", stderr)
	}
	if len(st.Extensions) == 0 {
		t.Error("nothing replayed before the cut")
	}
}

func TestReplayErrors(t *testing.T) {
	for _, args := range [][]string{{}, {"/nonexistent.ami"}, {"a.ami", "b.ami"}} {
		err := run(context.Background(), append([]string{"replay"}, args...), sysIO{func(string) string { return "" }, nil, &bytes.Buffer{}, &bytes.Buffer{}})
		if err == nil {
			t.Errorf("replay %v: no error", args)
		}
	}
}
