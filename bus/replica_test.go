package bus

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/calls"
)

// recordings are the AMI streams recorded from Asterisk 22 in the
// repository's testdata.
func recordings(t testing.TB) []string {
	a, _ := filepath.Glob("../ami/testdata/*.ami")
	b, _ := filepath.Glob("../calls/testdata/*.ami")
	all := append(a, b...)
	if len(all) < 10 {
		t.Fatalf("found only %d recordings", len(all))
	}
	return all
}

func readRecording(t testing.TB, path string) []ami.Message {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r := ami.NewReader(bufio.NewReader(bytes.NewReader(data)), ami.ReaderConfig{})
	if _, err := r.ReadBanner(); err != nil {
		t.Fatal(err)
	}
	var out []ami.Message
	for {
		m, err := r.ReadMessage()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, m)
	}
}

// names is a phonebook for the lookups: a recording replica asks it, a
// replaying one must not.
func names(num string) string {
	if num == "202" || len(num) > 6 {
		return "Contact " + num
	}
	return ""
}

// drive plays msgs into e the way link does: a resync (lists applied,
// follow-ups asked and answered), then batches of live events, each ended
// by Publish, with a RefreshDurations between batches and a reconcile.
// The clock advances 137 ms per message.
func drive(e interface {
	Apply(ami.Message)
	Publish() *calls.Snapshot
	SetLink(calls.LinkState)
	BeginResync()
	EndResync()
	BeginReconcile()
	Reconcile([]ami.Message) int
	Followups(calls.FollowupKind) []ami.Message
	ApplyAnswer(ami.Message, ami.Response, error)
	RefreshDurations() *calls.Snapshot
}, msgs []ami.Message, tick func()) {
	e.SetLink(calls.LinkResyncing)
	e.BeginResync()
	var items []ami.Message
	for _, m := range msgs {
		if m.Get("ActionID") != "" && m.Kind() == ami.KindEvent {
			items = append(items, m)
		}
	}
	for _, m := range items {
		tick()
		e.Apply(m)
	}
	for i, a := range e.Followups(calls.FollowResync) {
		tick()
		var err error
		if i%3 == 1 {
			err = &ami.ActionError{Action: a.Action(), Message: "Invalid/unknown command"}
		}
		e.ApplyAnswer(a, ami.Response{Message: ami.NewMessage(ami.Header{Key: "Response", Value: "Success"})}, err)
	}
	e.EndResync()
	e.Publish()
	for i := 0; i < len(msgs); i += 7 {
		for _, m := range msgs[i:min(i+7, len(msgs))] {
			tick()
			e.Apply(m)
		}
		e.Publish()
		e.Followups(calls.FollowPending)
		tick()
		e.RefreshDurations()
		if i%70 == 0 {
			e.BeginReconcile()
			tick()
			e.Reconcile(items)
			e.Publish()
		}
	}
	tick()
	e.SetLink(calls.LinkDown)
	e.Publish()
}

// state is everything a client can read from an engine.
func state(e *calls.Engine) string {
	s := e.Snapshot()
	var b bytes.Buffer
	fmt.Fprintf(&b, "version %d seq %d\n%s\n%s\n", s.Version, s.Seq, s.StateJSON(), s.PresenceJSON())
	ch, _ := e.Feed().Since(0)
	for _, c := range ch {
		fmt.Fprintf(&b, "%d %s %s %d %s\n", c.Seq, c.Type, c.Key, c.At, c.Data)
	}
	return b.String()
}

func engineConfig() calls.Config {
	return calls.Config{NameLookup: names, Names: map[string]string{"201": "Alice"}, FeedSize: 100000}
}

// recordLog drives a recording replica over msgs and returns its log.
func recordLog(t testing.TB, msgs []ami.Message) (*Replica, [][]byte) {
	var log [][]byte
	leader := NewReplica(engineConfig())
	clock := time.UnixMilli(1796027700000)
	leader.chunk = 4 << 10 // exercise chunking
	leader.Record(func(data []byte, final bool) error {
		log = append(log, bytes.Clone(data))
		return nil
	}, func(err error) { t.Fatal(err) }, func() time.Time { return clock })
	drive(leader, msgs, func() { clock = clock.Add(137 * time.Millisecond) })
	return leader, log
}

// TestReplicaDeterministic: an engine fed a recording replica's op log
// reaches byte-identical snapshots and an identical feed (seqs, times,
// bytes) for every recording in the repository; a third one, replaying
// the same log, too. The log is what edges and the standby bridge read.
func TestReplicaDeterministic(t *testing.T) {
	for _, path := range recordings(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			msgs := readRecording(t, path)
			leader, log := recordLog(t, msgs)
			want := state(leader.Engine())
			if leader.Engine().Feed().LastSeq() == 0 {
				t.Fatal("the recording produced no change")
			}
			for range 2 {
				f := NewReplica(calls.Config{NameLookup: func(string) string { t.Fatal("a replaying replica asked the phonebook"); return "" },
					Names: map[string]string{"201": "Alice"}, FeedSize: 100000})
				for i, m := range log {
					if err := f.Replay(m); err != nil {
						t.Fatalf("message %d: %v", i, err)
					}
				}
				if got := state(f.Engine()); got != want {
					t.Fatalf("replayed state differs from the recorder's:\n--- recorder\n%.2000s\n--- replay\n%.2000s", want, got)
				}
			}
		})
	}
}

// TestReplayRefusesCorrupt: a truncated or altered message is refused
// whole with ErrCorrupt, never a panic, and leaves the engine untouched.
func TestReplayRefusesCorrupt(t *testing.T) {
	_, log := recordLog(t, readRecording(t, "../ami/testdata/basic_call_caller_hangup.ami"))
	var biggest []byte
	for _, m := range log {
		if len(m) > len(biggest) {
			biggest = m
		}
	}
	f := NewReplica(calls.Config{})
	before := state(f.Engine())
	for n := range len(biggest) - 1 {
		if err := f.Replay(biggest[:n]); !errors.Is(err, ErrCorrupt) && n > 2 {
			// A cut between two ops is a valid, shorter message.
			if err == nil && cutAtOp(biggest, n) {
				f = NewReplica(calls.Config{})
				continue
			}
			t.Fatalf("cut at %d: %v", n, err)
		}
	}
	bad := slices.Clone(biggest)
	bad[0] = 9
	if err := f.Replay(bad); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("version 9: %v", err)
	}
	f = NewReplica(calls.Config{})
	bad = slices.Clone(biggest)
	bad[2] = 99
	if err := f.Replay(bad); !errors.Is(err, ErrCorrupt) || state(f.Engine()) != before {
		t.Fatalf("unknown op: %v (engine changed: %v)", err, state(f.Engine()) != before)
	}
}

// cutAtOp reports whether b[:n] ends on an op boundary (it decodes).
func cutAtOp(b []byte, n int) bool {
	return walkOps(b[:n], func(byte) bool { return true }) == nil
}
