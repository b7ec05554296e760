package resttest

import (
	"strings"
	"testing"
)

func TestEngine(t *testing.T) {
	e := Engine(Options{Extensions: 100, InCall: 30})
	s := e.Snapshot()
	if s.Extensions.Len() != 100 {
		t.Fatalf("%d extensions", s.Extensions.Len())
	}
	inCall := 0
	for _, x := range s.Extensions.All() {
		if len(x.Conversations) > 0 {
			inCall++
		}
	}
	if inCall != 30 {
		t.Errorf("%d extensions in a call, want 30", inCall)
	}
	if s.Stale {
		t.Error("stale")
	}
	n := len(s.ExtensionsJSON())
	t.Logf("extensions JSON: %d bytes; queues %s; parkings %d bytes; trunks %s", n, s.QueuesJSON()[:200], len(s.ParkingsJSON()), s.TrunksJSON())
	if n < 20000 || n > 40000 {
		t.Errorf("extensions JSON is %d bytes, want about 28 KB", n)
	}
	if !strings.Contains(string(s.ParkingsJSON()), ParkedNum) {
		t.Error("no parked caller")
	}
	if !strings.Contains(string(s.QueuesJSON()), QueueNum) {
		t.Error("no queue caller")
	}
	if !strings.Contains(string(s.TrunksJSON()), TrunkChan) {
		t.Error("no trunk call")
	}
	t.Logf("ext 2000: %s", s.ExtensionJSON("2000"))
}
