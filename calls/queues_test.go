package calls

import "testing"

// TestQueueNumberAlias: in queue_answered the caller dials 600 and waits in
// app_queue's "support" (queue_answered.md); the queue answers to both.
func TestQueueNumberAlias(t *testing.T) {
	rec := loadRecording(t, "queue_answered")
	e := New(testConfig(nil))
	for _, m := range rec.msgs {
		e.Apply(m)
	}
	s := e.Publish()
	for id, want := range map[string]string{"support": "support", "600": "support"} {
		if got, ok := s.QueueName(id); !ok || got != want {
			t.Errorf("QueueName(%q) = %q, %v; want %q", id, got, ok, want)
		}
	}
	for _, id := range []string{"", "601", "Support"} {
		if got, ok := s.QueueName(id); ok {
			t.Errorf("QueueName(%q) = %q, want none", id, got)
		}
	}
	if q := s.Queues["support"]; q.Number != "600" {
		t.Errorf("support's number = %q, want 600", q.Number)
	}
}

func TestIsDialString(t *testing.T) {
	for s, want := range map[string]bool{"600": true, "*97": true, "+39721": true, "": false, "6+0": false,
		"s": false, "60\r\n": false, "123456789012345678901234567890123": false} {
		if got := isDialString(s); got != want {
			t.Errorf("isDialString(%q) = %v", s, got)
		}
	}
}

// TestQueueNumbersConfigured: a number given in Config answers from the
// first snapshot, before any caller joined.
func TestQueueNumbersConfigured(t *testing.T) {
	rec := loadRecording(t, "queue_dynamic_members") // QueueAdd creates it, a caller joins later
	e := New(Config{Trunks: []string{"trunk"}, QueueNumbers: map[string]string{"support": "600", "other": "x"}})
	for _, m := range rec.msgs {
		if m.Event() == "QueueCallerJoin" {
			break
		}
		e.Apply(m)
	}
	s := e.Publish()
	if _, ok := s.Queues["support"]; !ok {
		t.Fatal("no queue support before the caller joined")
	}
	if name, ok := s.QueueName("600"); !ok || name != "support" {
		t.Errorf("QueueName(600) = %q, %v before any caller joined", name, ok)
	}
}
