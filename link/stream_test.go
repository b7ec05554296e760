package link_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/ami/amitest"
	"github.com/ctibridge/ctibridge/calls"
)

// convLines is every conversation of a snapshot that a screen shows, as
// sorted text (times aside).
func convLines(s *calls.Snapshot) string {
	var out []string
	for k, x := range s.Extensions.All() {
		for id, c := range x.Conversations {
			out = append(out, fmt.Sprintf("%s %s connected=%v %s %s", k, id, c.Connected, c.Direction, c.CounterpartNum))
		}
	}
	slices.Sort(out)
	return strings.Join(out, "\n")
}

// TestStreamWithDropsConverges is the fault suite's run in miniature: a
// fake PBX streams a recording of ten calls and answers the resync's
// lists with what it has streamed so far; the connection is killed
// three times while calls are up and events go on while it is down. At each checkpoint the
// bridge must show exactly the calls the events show: none lost, none
// invented, every connected call connected.
func TestStreamWithDropsConverges(t *testing.T) {
	var msgs []ami.Message
	for _, m := range recording(t, "load_10_calls_5cps.ami") {
		if m.ActionID() == "" {
			msgs = append(msgs, m)
		}
	}
	// The truth at every point, and where the most calls are connected.
	truth := calls.New(calls.Config{})
	truth.SetLink(calls.LinkLive)
	want := make([]string, len(msgs)+1)
	busy := make([]int, len(msgs)+1)
	for i, m := range msgs {
		truth.Apply(m)
		s := truth.Publish()
		want[i+1] = convLines(s)
		busy[i+1] = strings.Count(want[i+1], "connected=true")
	}
	var checkpoints []int
	for _, third := range []int{1, 2, 3} {
		lo, hi := (third-1)*len(msgs)/3, third*len(msgs)/3
		best := lo + 40
		for i := lo + 40; i < hi; i++ {
			if busy[i] > busy[best] {
				best = i
			}
		}
		checkpoints = append(checkpoints, best)
	}

	srv := amitest.NewServer(t)
	model := amitest.NewModel()
	model.Configure(msgs)
	eng, client, _ := startVia(t, srv, srv.Addr())
	model.Serve(srv) // after startVia's empty lists
	waitFor(t, eng, "link live", func(s state) bool { return s.PBX.PBX == "live" })
	// The first resync predates Serve: make one from the model now.
	srv.Drop()
	waitFor(t, eng, "live again", func(s state) bool { return s.PBX.PBX == "live" && client.Stats().Reconnects == 1 })

	next := 0
	for n, cp := range checkpoints {
		drop := cp - 30
		for ; next < cp; next++ {
			if next == drop {
				srv.Drop() // the link dies; 30 events happen while it is down
			}
			model.Apply(msgs[next])
			srv.Broadcast(msgs[next])
			if next%4 == 0 {
				time.Sleep(time.Millisecond)
			}
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			s := eng.Snapshot()
			got := convLines(s)
			if s.Link == calls.LinkLive && got == want[cp] {
				t.Logf("checkpoint %d (event %d): %d connected conversations, as in the events; %d reconnects so far", n, cp, busy[cp], client.Stats().Reconnects)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("checkpoint %d (event %d), link %v:\ngot\n%s\nwant\n%s", n, cp, s.Link, got, want[cp])
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}
