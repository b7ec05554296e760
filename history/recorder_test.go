package history

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/dbtest"
)

func cdrEvent(i int) ami.Message {
	return ami.NewMessage([]ami.Header{
		{Key: "Event", Value: "Cdr"}, {Key: "Source", Value: "201"}, {Key: "Destination", Value: "202"},
		{Key: "CallerID", Value: `"Alice" <201>`}, {Key: "Channel", Value: "PJSIP/201-00000001"},
		{Key: "StartTime", Value: t0.Add(time.Duration(i) * time.Second).Format(time.DateTime)},
		{Key: "Duration", Value: "3"}, {Key: "BillableSeconds", Value: "1"}, {Key: "Disposition", Value: "ANSWERED"},
		{Key: "UniqueID", Value: fmt.Sprintf("1700000000.%d", i)},
	}...)
}

func startRecorder(t *testing.T, s Store, dir string, max int64) (*Recorder, func()) {
	t.Helper()
	rec, err := NewRecorder(s, RecorderConfig{SpoolDir: dir, MaxSpool: max,
		RetryMax: 100 * time.Millisecond, WriteTimeout: 2 * time.Second, Location: time.UTC})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { rec.Run(ctx) })
	return rec, func() { cancel(); wg.Wait() }
}

// legsInOrder returns the uniqueids stored, in insertion (id) order.
func legsInOrder(t *testing.T, s *SQLStore) []string {
	t.Helper()
	rs, done, err := s.c.Query(context.Background(), `SELECT uniqueid FROM cdr ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	var out []string
	for rs.Next() {
		var u string
		rs.Scan(&u)
		out = append(out, u)
	}
	return out
}

func checkOrder(t *testing.T, got []string, n int) {
	t.Helper()
	if len(got) != n {
		t.Fatalf("%d rows stored, want %d", len(got), n)
	}
	for i, u := range got {
		if want := fmt.Sprintf("1700000000.%d", i); u != want {
			t.Fatalf("row %d is %s, want %s: not written in order", i, u, want)
		}
	}
}

// TestRecorderSurvivesDatabaseOutage stops a real PostgreSQL server in
// the middle of the traffic and starts it again: nothing is lost, nothing
// duplicated, and the rows are written in the order the CDRs came.
func TestRecorderSurvivesDatabaseOutage(t *testing.T) {
	cluster, dsn := dbtest.NewCluster(t)
	s := NewPostgres(openPostgres(t, dsn), Config{})
	rec, stop := startRecorder(t, s, t.TempDir(), 0)
	defer stop()
	for i := range 200 {
		rec.Observe(cdrEvent(i))
	}
	dbtest.WaitFor(t, "the first 200 rows", func() bool { return rec.Stats().Written == 200 })
	if err := cluster.Stop(); err != nil {
		t.Fatal(err)
	}
	for i := 200; i < 500; i++ {
		rec.Observe(cdrEvent(i))
		if i%50 == 0 {
			time.Sleep(20 * time.Millisecond) // several batches, several failed attempts
		}
	}
	dbtest.WaitFor(t, "spooling", func() bool { st := rec.Stats(); return st.Spooled == 500 && st.Pending == 300 && st.StoreDown })
	if err := cluster.Start(); err != nil {
		t.Fatal(err)
	}
	dbtest.WaitFor(t, "the spool to drain", func() bool { st := rec.Stats(); return st.Pending == 0 && st.Written == 500 })
	checkOrder(t, legsInOrder(t, s), 500)
	if st := rec.Stats(); st.Dropped != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// flaky is a Store whose writes fail while down is set.
type flaky struct {
	*SQLStore
	down atomic.Bool
}

func (f *flaky) Insert(ctx context.Context, c []CDR) error {
	if f.down.Load() {
		return errors.New("down")
	}
	return f.SQLStore.Insert(ctx, c)
}

// TestRecorderSpoolResumesAfterRestart: CDRs spooled when ctibridge stops
// are written by the next process, in order; the bound drops (and
// counts) what does not fit.
func TestRecorderSpoolResumesAfterRestart(t *testing.T) {
	s := &flaky{SQLStore: NewSQLite(openSQLite(t), Config{})}
	dir := t.TempDir()
	s.down.Store(true)
	rec, stop := startRecorder(t, s, dir, 1<<20)
	for i := range 100 {
		rec.Observe(cdrEvent(i))
	}
	stop()
	if st := rec.Stats(); st.Spooled != 100 || st.Written != 0 || st.Pending != 100 {
		t.Fatalf("after the first run: %+v", st)
	}
	s.down.Store(false)
	rec, stop = startRecorder(t, s, dir, 1<<20)
	for i := 100; i < 150; i++ {
		rec.Observe(cdrEvent(i))
	}
	dbtest.WaitFor(t, "the spool to drain", func() bool { return rec.Stats().Written == 150 })
	stop()
	checkOrder(t, legsInOrder(t, s.SQLStore), 150)

	// Bound: a 2 KiB spool holds a few CDRs; the rest are dropped.
	s.down.Store(true)
	rec, stop = startRecorder(t, s, t.TempDir(), 2048)
	for i := range 50 {
		rec.Observe(cdrEvent(1000 + i))
	}
	dbtest.WaitFor(t, "drops", func() bool { st := rec.Stats(); return st.Dropped > 0 && st.Dropped+st.Spooled == 50 })
	stop()
}

func TestFromEvent(t *testing.T) {
	m := cdrEvent(1)
	c, ok := FromEvent(m, time.UTC, func(string) string { return "L1" })
	if !ok || c.LinkedID != "L1" || c.Src != "201" || c.Billsec != 1 || !c.CallDate.Equal(t0.Add(time.Second)) || c.Sequence == 0 {
		t.Fatalf("%+v", c)
	}
	c2, _ := FromEvent(m, time.UTC, nil)
	if c2.Sequence != c.Sequence || c2.LinkedID != c.UniqueID {
		t.Fatalf("sequence not derived from content: %+v", c2)
	}
	m = m.Add("LinkedID", "L9").Add("Sequence", "4")
	if c, _ := FromEvent(m, time.UTC, nil); c.LinkedID != "L9" || c.Sequence != 4 {
		t.Fatalf("mapped fields ignored: %+v", c)
	}
	if _, ok := FromEvent(ami.NewMessage([]ami.Header{{Key: "Event", Value: "Hangup"}}...), time.UTC, nil); ok {
		t.Fatal("Hangup taken for a Cdr")
	}
}

// TestRecorderSetsAsideRefusedCDR: a CDR PostgreSQL refuses for its
// content (a source too long for the index) is set aside in
// cdr-rejected.jsonl, logged and counted, and the CDRs before and after
// it are written; values no database column takes as they are (NUL,
// invalid UTF-8, numbers past int32) are cleaned when the event is read,
// not refused.
func TestRecorderSetsAsideRefusedCDR(t *testing.T) {
	s := NewPostgres(openPostgres(t, dbtest.Postgres(t)), Config{})
	dir := t.TempDir()
	rec, stop := startRecorder(t, s, dir, 0)
	defer stop()
	// Random, so that the index cannot compress it under its 2,704 bytes.
	raw := make([]byte, 20000)
	rand.Read(raw)
	huge := hex.EncodeToString(raw)
	for i := range 5 {
		rec.Observe(cdrEvent(i))
	}
	rec.Observe(cdrEvent(5).Set("Source", huge))
	rec.Observe(cdrEvent(6).Set("CallerID", "\"Al\x00ice\xff\" <201>").Set("Duration", "99999999999").Set("Sequence", "4294967296"))
	for i := 7; i < 12; i++ {
		rec.Observe(cdrEvent(i))
	}
	dbtest.WaitFor(t, "the good CDRs written and the bad one set aside", func() bool {
		st := rec.Stats()
		return st.Rejected == 1 && st.Pending == 0 && !st.StoreDown
	})
	got := legsInOrder(t, s)
	if len(got) != 11 {
		t.Fatalf("%d rows stored, want 11: %v", len(got), got)
	}
	b, err := os.ReadFile(filepath.Join(dir, rejectedFile))
	if err != nil || !strings.Contains(string(b), `"uniqueid":"1700000000.5"`) || !strings.Contains(string(b), `"err":`) {
		t.Fatalf("rejected file: %v\n%.300s", err, b)
	}
	var clid string
	var dur int
	if err := s.c.QueryRow(context.Background(), `SELECT clid, duration FROM cdr WHERE uniqueid = '1700000000.6'`)(&clid, &dur); err != nil {
		t.Fatal(err)
	}
	if clid != "\"Alice\uFFFD\" <201>" || dur != 0 {
		t.Errorf("cleaned CDR stored as clid %q, duration %d", clid, dur)
	}
}

// TestRecordingFile: Asterisk's Cdr event names no recording file. The file
// start_record asked for (NoteRecording) or the MIXMONITOR_FILENAME a
// MixMonitor set (VarSet) goes into the history row of the CDR that names
// the channel, as its channel or its destination.
func TestRecordingFile(t *testing.T) {
	for _, c := range []struct {
		name string
		note func(*Recorder)
	}{
		{"start_record on the callee", func(r *Recorder) { r.NoteRecording("PJSIP/202-00000001", "ctibridge-bob.wav") }},
		{"VarSet on the caller", func(r *Recorder) {
			r.Observe(ami.NewMessage([]ami.Header{{Key: "Event", Value: "VarSet"}, {Key: "Privilege", Value: "dialplan,all"},
				{Key: "Channel", Value: "PJSIP/201-00000000"}, {Key: "Variable", Value: "MIXMONITOR_FILENAME"},
				{Key: "Value", Value: "/var/spool/asterisk/monitor/alice.wav"}, {Key: "Uniqueid", Value: "1796028439.0"},
				{Key: "Linkedid", Value: "1796028439.0"}}...))
		}},
		{"control characters refused", func(r *Recorder) { r.NoteRecording("PJSIP/202-00000001", "a\r\nb.wav") }},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := NewSQLite(openSQLite(t), Config{})
			rec, stop := startRecorder(t, s, t.TempDir(), 0)
			defer stop()
			c.note(rec)
			replay(t, "../ami/testdata/basic_call_caller_hangup.ami", rec.Observe)
			dbtest.WaitFor(t, "the CDR", func() bool { return rec.Stats().Written == 1 })
			calls := all(t, s, Query{From: time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC), To: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)})
			if len(calls) != 1 {
				t.Fatalf("%d calls", len(calls))
			}
			want := map[string]string{"start_record on the callee": "ctibridge-bob.wav",
				"VarSet on the caller": "/var/spool/asterisk/monitor/alice.wav", "control characters refused": ""}[c.name]
			if got := calls[0].RecordingFile; got != want {
				t.Errorf("recordingfile %q, want %q", got, want)
			}
		})
	}
}
