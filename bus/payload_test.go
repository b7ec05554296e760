package bus

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/bus/natstest"
)

// bigTree is a DBGetTree answer of n AMPUSER names (about 60 bytes an
// item), with one item of pad bytes when pad > 0.
func bigTree(n, pad int) (ami.Message, ami.Response) {
	action := ami.NewAction(ami.ActionDBGetTree, "Family", "AMPUSER")
	var items []ami.Message
	for i := range n {
		items = append(items, ami.NewMessage(ami.Header{Key: "Event", Value: ami.EventDBGetTreeResponse},
			ami.Header{Key: "Key", Value: fmt.Sprintf("/AMPUSER/%d/cidname", 1000+i)}, ami.Header{Key: "Val", Value: fmt.Sprintf("Name of %d", 1000+i)}))
	}
	items = append(items, ami.NewMessage(ami.Header{Key: "Event", Value: ami.EventDBGetTreeResponse},
		ami.Header{Key: "Key", Value: "/AMPUSER/202/cidname"}, ami.Header{Key: "Val", Value: "Bob From AstDB"}))
	if pad > 0 {
		items = append(items, ami.NewMessage(ami.Header{Key: "Event", Value: ami.EventDBGetTreeResponse},
			ami.Header{Key: "Key", Value: "/AMPUSER/201/cidname"}, ami.Header{Key: "Val", Value: strings.Repeat("x", pad)}))
	}
	items = append(items, ami.NewMessage(ami.Header{Key: "Event", Value: ami.EventDBGetTreeComplete}))
	return action, ami.Response{Message: ami.NewMessage(ami.Header{Key: "Response", Value: "Success"}), Items: items}
}

// TestBoundedMessages: with the stream's messages bounded (maxMsg, as
// under a small NATS max_payload), a follow-up's answer of 2,000 items is
// split between messages, an item and an AMI message larger than a
// message are dropped (onDrop), every message fits, and a replica that
// replays the log serves the recorder's state byte for byte.
func TestBoundedMessages(t *testing.T) {
	const maxMsg = 16 << 10
	var log [][]byte
	var drops []string
	leader := NewReplica(engineConfig())
	clock := time.UnixMilli(1796027700000)
	leader.maxMsg, leader.chunk = maxMsg, 4<<10
	leader.onDrop = func(op byte, size int) { drops = append(drops, fmt.Sprintf("op %d %d bytes", op, size)) }
	leader.Record(func(data []byte, final bool) error {
		if len(data) > maxMsg {
			t.Fatalf("a message of %d bytes, bound %d", len(data), maxMsg)
		}
		log = append(log, bytes.Clone(data))
		return nil
	}, func(err error) { t.Fatal(err) }, func() time.Time { return clock })
	msgs := readRecording(t, "../ami/testdata/basic_call_caller_hangup.ami")
	drive(leader, msgs[:len(msgs)/2], func() { clock = clock.Add(137 * time.Millisecond) })
	action, resp := bigTree(2000, 20<<10)
	leader.ApplyAnswer(action, resp, nil)
	leader.Apply(ami.NewMessage(ami.Header{Key: "Event", Value: "UserEvent"}, ami.Header{Key: "Data", Value: strings.Repeat("y", maxMsg)}))
	// Just under the bound: after the batch so far it starts a message.
	leader.Apply(ami.NewMessage(ami.Header{Key: "Event", Value: "UserEvent"}, ami.Header{Key: "Data", Value: strings.Repeat("w", 1000)}))
	leader.Apply(ami.NewMessage(ami.Header{Key: "Event", Value: "UserEvent"}, ami.Header{Key: "Data", Value: strings.Repeat("z", maxMsg-200)}))
	leader.Publish()
	// A response message too large itself: the whole answer is dropped,
	// none of its items left for the next answer.
	_, huge := bigTree(2000, 0)
	huge.Message = ami.NewMessage(ami.Header{Key: "Response", Value: "Success"}, ami.Header{Key: "Message", Value: strings.Repeat("m", maxMsg)})
	leader.ApplyAnswer(action, huge, nil)
	leader.Publish()
	drive(leader, msgs[len(msgs)/2:], func() { clock = clock.Add(137 * time.Millisecond) })
	if len(drops) != 3 || !strings.HasPrefix(drops[0], "op 14 ") || !strings.HasPrefix(drops[1], "op 1 ") || !strings.HasPrefix(drops[2], "op 15 ") {
		t.Fatalf("dropped %v, want the 20 KiB item (op 14), the 16 KiB message (op 1), the answer with a 16 KiB response (op 15)", drops)
	}
	f := NewReplica(engineConfig())
	replayLog(t, f, log)
	if len(f.answer) != 0 {
		t.Fatalf("the replayer keeps %d answer items for an answer to come", len(f.answer))
	}
	if got, want := state(f.Engine()), state(leader.Engine()); got != want {
		t.Fatalf("replayed state differs:\n--- recorder\n%.1500s\n--- replay\n%.1500s", want, got)
	}
	if !strings.Contains(string(f.Engine().Snapshot().ExtensionJSON("202")), "Bob From AstDB") {
		t.Fatalf("the split answer's name is not shown: %s", f.Engine().Snapshot().ExtensionJSON("202"))
	}
	t.Logf("%d messages, drops %v", len(log), drops)
}

// TestMaxPayload: a nats-server whose max_payload is 64 KiB, a PBX whose
// AstDB holds 3,000 names (the resync's DBGetTree answer is some 200 KB,
// more than one message may carry). The leader neither steps down nor
// loops: it leads, the edge is live with the same state, and 201's name
// from AstDB shows.
func TestMaxPayload(t *testing.T) {
	srv := natstest.StartConf(t, "max_payload: 65536")
	sim := startSim(t)
	client := ami.NewClient(ami.Config{Addr: sim.AMIAddr(), Username: "ctibridge", Secret: "ctibridge"})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cctx, ccancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { client.Run(cctx); close(done) }()
	defer func() { ccancel(); <-done }()
	put := func(key, val string) {
		if _, err := client.Do(ctx, ami.NewAction(ami.ActionDBPut, "Family", "AMPUSER", "Key", key, "Val", val)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the AMI client", 10*time.Second, client.Connected)
	for i := range 3000 {
		put(fmt.Sprintf("%d/cidname", 1000+i), fmt.Sprintf("A rather long display name for extension %d", 1000+i))
	}
	put("201/cidname", "Alice From AstDB")

	bridge := startNode(t, srv.URL(), "bridge-a", sim.AMIAddr(), 2*time.Second)
	edge := startNode(t, srv.URL(), "edge-1", "", 2*time.Second)
	waitFor(t, "the bridge to lead and the edge live with 201's AstDB name", 30*time.Second, func() bool {
		return bridge.n.Leading() && live(edge.served) && strings.Contains(string(edge.served.Engine().Snapshot().ExtensionJSON("201")), "Alice From AstDB")
	})
	waitFor(t, "identical state on bridge and edge", 10*time.Second, func() bool { return same(bridge.served, edge.served) })
	time.Sleep(3 * time.Second) // a follow-up refresh or two more
	if bridge.stopped() || !bridge.n.Leading() || edge.stopped() {
		t.Fatalf("bridge stopped %v (%v), leading %v; edge stopped %v (%v)", bridge.stopped(), bridge.err, bridge.n.Leading(), edge.stopped(), edge.err)
	}
	if st := bridge.n.Stats(); st.Takeovers != 1 || st.Dropped != 0 {
		t.Fatalf("bridge-a: %+v, want one lead and nothing dropped", st)
	}
}
