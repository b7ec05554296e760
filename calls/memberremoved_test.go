package calls

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
)

// queueClient is a WebSocket client applying a feed's queue changes as
// docs/websocket.md says: queueMembers' set and removed, and a
// queueMemberUpdate put under its member's key.
type queueClient map[string]map[string]bool // queue -> members

func (qc queueClient) apply(t *testing.T, c Change) {
	t.Helper()
	var d struct {
		Queue   string                     `json:"queue"`
		Member  string                     `json:"member"`
		Set     map[string]json.RawMessage `json:"set"`
		Removed []string                   `json:"removed"`
	}
	switch c.Type {
	case QueueMembers, QueueMemberUpdate:
		if err := json.Unmarshal(c.Data, &d); err != nil {
			t.Fatalf("%s: %v\n%s", c.Type, err, c.Data)
		}
	default:
		return
	}
	if qc[d.Queue] == nil {
		qc[d.Queue] = map[string]bool{}
	}
	if c.Type == QueueMemberUpdate {
		qc[d.Queue][d.Member] = true
		return
	}
	for k := range d.Set {
		qc[d.Queue][k] = true
	}
	for _, k := range d.Removed {
		delete(qc[d.Queue], k)
	}
}

// members lists "queue/member" the client holds.
func (qc queueClient) members() []string {
	var out []string
	for q, ms := range qc {
		for m := range ms {
			out = append(out, q+"/"+m)
		}
	}
	sort.Strings(out)
	return out
}

// snapshotMembers lists "queue/member" of a snapshot.
func snapshotMembers(s *Snapshot) []string {
	var out []string
	for q, v := range s.Queues.All() {
		for m := range v.Members {
			out = append(out, q+"/"+m)
		}
	}
	sort.Strings(out)
	return out
}

// TestMemberRemovedOnce: in queue_dynamic_members Alice (201) leaves
// queue support (QueueRemove: QueueMemberRemoved). The feed says so once,
// in the queue's change, with no queueMemberUpdate after it: a client
// applying the docs literally used to put her back (as logged out). The
// engine's feed and the combined one (default PBX and site2) are applied
// by such a client after each message and must hold the snapshot's
// members.
func TestMemberRemovedOnce(t *testing.T) {
	rec := loadRecording(t, "queue_dynamic_members")
	var sc StreamClock
	p := newTwoPBXs(sc.Now)
	seqA, seqM := p.a.Feed().LastSeq(), p.m.Feed().LastSeq()
	eng, comb := queueClient{}, queueClient{}
	removed := 0
	for i, m := range rec.msgs {
		sc.Observe(m)
		p.a.Apply(m)
		p.b.Apply(m)
		p.a.Publish()
		p.b.Publish()
		p.m.Sync(0)
		p.m.Sync(1)
		ca, _ := p.a.Feed().Since(seqA)
		cm, ok := p.m.Feed().Since(seqM)
		if !ok {
			t.Fatal("combined feed lost changes")
		}
		seqA, seqM = p.a.Feed().LastSeq(), p.m.Feed().LastSeq()
		for _, c := range ca {
			eng.apply(t, c)
		}
		for _, c := range cm {
			comb.apply(t, c)
		}
		if m.Event() == "QueueMemberRemoved" {
			removed++
			var types []string
			for _, c := range ca {
				if strings.Contains(string(c.Data), `"201"`) {
					types = append(types, c.Type.String())
				}
			}
			if !slices.Equal(types, []string{QueueMembers.String()}) {
				t.Errorf("after #%d QueueMemberRemoved: changes naming 201 %v, want one queueMembers", i, types)
			}
		}
		label := fmt.Sprintf("after #%d %s", i, m.Event())
		if got, want := eng.members(), snapshotMembers(p.a.Snapshot()); !slices.Equal(got, want) {
			t.Fatalf("%s: the engine's feed applied gives %v, the snapshot %v", label, got, want)
		}
		if got, want := comb.members(), snapshotMembers(p.m.Snapshot()); !slices.Equal(got, want) {
			t.Fatalf("%s: the combined feed applied gives %v, the snapshot %v", label, got, want)
		}
	}
	if removed == 0 {
		t.Fatal("the recording has no QueueMemberRemoved")
	}
	if slices.Contains(eng.members(), "support/201") {
		t.Error("201 still a member of support at the end")
	}
}
