package history

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
)

var ctx = context.Background()

var t0 = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

func names(n string) string {
	return map[string]string{"0721405516": "Mario Rossi", "202": "Bob"}[n]
}

// call makes the CDRs of one call: legs from src, the first to dst.
func call(id int, at time.Time, src, dst string, legs ...string) []CDR {
	link := fmt.Sprintf("%d.%d", at.Unix(), id)
	var out []CDR
	for i, disp := range legs {
		out = append(out, CDR{CallDate: at.Add(time.Duration(i) * time.Second), CLID: `"" <` + src + `>`, Src: src, Dst: dst,
			Channel: "PJSIP/" + src + "-0001", DstChannel: fmt.Sprintf("PJSIP/%s-%04d", dst, i), LastApp: "Dial",
			Duration: 10, Billsec: map[string]int{"ANSWERED": 7}[disp], Disposition: disp,
			UniqueID: link, LinkedID: link, Sequence: i})
	}
	return out
}

func TestConformance(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			for _, tc := range []struct {
				name string
				fn   func(t *testing.T, s *SQLStore)
			}{
				{"InsertIdempotent", testInsertIdempotent},
				{"Grouping", testGrouping},
				{"Filters", testFilters},
				{"BadInput", testBadInput},
				{"PBXs", testPBXs},
				{"PagingStable", testPagingStable},
				{"Export", testExport},
				{"Recordings", testRecordings},
			} {
				t.Run(tc.name, func(t *testing.T) {
					tc.fn(t, be.open(t, Config{NameLookup: names, MaxWindow: 31 * 24 * time.Hour}))
				})
			}
		})
	}
}

func mustInsert(t *testing.T, s Store, cdrs []CDR) {
	t.Helper()
	if err := s.Insert(ctx, cdrs); err != nil {
		t.Fatal(err)
	}
}

func all(t *testing.T, s Store, q Query) []Call {
	t.Helper()
	var out []Call
	for {
		p, err := s.Calls(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p.Rows...)
		if p.Next == nil {
			return out
		}
		q.Cursor = *p.Next
	}
}

func window() Query { return Query{From: t0, To: t0.Add(24 * time.Hour)} }

func testInsertIdempotent(t *testing.T, s *SQLStore) {
	c := call(1, t0.Add(time.Hour), "201", "202", "NO ANSWER", "ANSWERED")
	mustInsert(t, s, c)
	mustInsert(t, s, c)                                               // a reconnect replays
	mustInsert(t, s, append(c, call(2, t0, "203", "204", "BUSY")...)) // a replica overlaps
	calls := all(t, s, window())
	if len(calls) != 2 || len(calls[0].Legs) != 2 || len(calls[1].Legs) != 1 {
		t.Fatalf("calls: %+v", calls)
	}
}

func testGrouping(t *testing.T, s *SQLStore) {
	mustInsert(t, s, call(1, t0.Add(time.Hour), "0721405516", "202", "NO ANSWER", "ANSWERED", "NO ANSWER"))
	calls := all(t, s, window())
	if len(calls) != 1 {
		t.Fatalf("%d calls", len(calls))
	}
	c := calls[0]
	if c.Disposition != "ANSWERED" || c.Billsec != 7 || c.Duration != 12 || c.Direction != DirIn ||
		c.CNAM != "Mario Rossi" || c.DstCNAM != "Bob" || c.Time != t0.Add(time.Hour).Unix() || len(c.Legs) != 3 ||
		c.Legs[1].Disposition != "ANSWERED" || c.Legs[2].DstChannel != "PJSIP/202-0002" {
		t.Fatalf("call: %+v", c)
	}
}

func testFilters(t *testing.T, s *SQLStore) {
	var cdrs []CDR
	cdrs = append(cdrs, call(1, t0.Add(1*time.Hour), "201", "202", "ANSWERED")...)         // internal
	cdrs = append(cdrs, call(2, t0.Add(2*time.Hour), "201", "0721405516", "ANSWERED")...)  // out
	cdrs = append(cdrs, call(3, t0.Add(3*time.Hour), "3331234567", "201", "NO ANSWER")...) // in
	cdrs = append(cdrs, call(4, t0.Add(4*time.Hour), "203", "204", "ANSWERED")...)         // not 201's
	cdrs = append(cdrs, call(5, t0.Add(5*time.Hour), "100%_x", "205", "ANSWERED")...)      // odd caller
	cdrs = append(cdrs, call(6, t0.Add(-time.Hour), "201", "202", "ANSWERED")...)          // before the window
	mustInsert(t, s, cdrs)
	ids := func(q Query) string {
		var out []string
		for _, c := range all(t, s, q) {
			out = append(out, c.LinkedID[strings.IndexByte(c.LinkedID, '.')+1:])
		}
		return strings.Join(out, ",")
	}
	q := window()
	for _, tc := range []struct {
		name string
		mod  func(q *Query)
		want string
	}{
		{"switchboard", func(q *Query) {}, "5,4,3,2,1"},
		{"personal", func(q *Query) { q.Extensions = []string{"201"} }, "3,2,1"},
		{"two extensions", func(q *Query) { q.Extensions = []string{"201", "204"} }, "4,3,2,1"},
		{"no extensions", func(q *Query) { q.Extensions = []string{} }, ""},
		{"in", func(q *Query) { q.Direction = DirIn }, "5,3"},
		{"out", func(q *Query) { q.Direction = DirOut; q.Extensions = []string{"201"} }, "2"},
		{"internal", func(q *Query) { q.Direction = DirInternal }, "4,1"},
		{"text number", func(q *Query) { q.Text = "0721" }, "2"},
		{"text percent", func(q *Query) { q.Text = "%" }, "5"},
		{"text underscore", func(q *Query) { q.Text = "_" }, "5"},
		{"text quote", func(q *Query) { q.Text = "'; DROP TABLE cdr; --" }, ""},
		{"text unicode", func(q *Query) { q.Text = "Zoë" }, ""},
		{"narrow window", func(q *Query) { q.From = t0.Add(90 * time.Minute); q.To = t0.Add(3 * time.Hour) }, "2"},
	} {
		qq := q
		tc.mod(&qq)
		if got := ids(qq); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	// A named PBX's calls (its recorder qualifies its extensions,
	// docs/operations.md "Several PBXs"): internal, out and in as the
	// default PBX's, whatever the length of "site2:201".
	mustInsert(t, s, slices.Concat(call(7, t0.Add(7*time.Hour), "site2:201", "site2:202", "ANSWERED"),
		call(8, t0.Add(8*time.Hour), "site2:201", "0721405516", "ANSWERED"),
		call(9, t0.Add(9*time.Hour), "3331234567", "site2:201", "ANSWERED")))
	for _, tc := range []struct {
		name string
		mod  func(q *Query)
		want string
	}{
		{"site2 internal", func(q *Query) { q.Direction = DirInternal; q.Extensions = []string{"site2:201"} }, "7"},
		{"site2 out", func(q *Query) { q.Direction = DirOut; q.Extensions = []string{"site2:201"} }, "8"},
		{"site2 in", func(q *Query) { q.Direction = DirIn; q.Extensions = []string{"site2:201"} }, "9"},
		{"internal", func(q *Query) { q.Direction = DirInternal }, "7,4,1"},
	} {
		qq := q
		tc.mod(&qq)
		if got := ids(qq); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	for _, c := range all(t, s, Query{From: t0.Add(7 * time.Hour), To: t0.Add(10 * time.Hour)}) {
		if want := map[string]string{"7": DirInternal, "8": DirOut, "9": DirIn}[c.LinkedID[strings.IndexByte(c.LinkedID, '.')+1:]]; c.Direction != want {
			t.Errorf("call %s (%s to %s): direction %s, want %s", c.LinkedID, c.Src, c.Dst, c.Direction, want)
		}
	}
}

// testPBXs: Query.PBXs keeps the calls of some PBXs, a named PBX's by
// its qualified uniqueid, the default PBX's by a bare one; "_" in a name
// is no wildcard.
func testPBXs(t *testing.T, s *SQLStore) {
	of := func(pbx string, cdrs []CDR) []CDR {
		for i := range cdrs {
			cdrs[i].UniqueID, cdrs[i].LinkedID = pbx+":"+cdrs[i].UniqueID, pbx+":"+cdrs[i].LinkedID
		}
		return cdrs
	}
	mustInsert(t, s, slices.Concat(call(1, t0.Add(1*time.Hour), "201", "202", "ANSWERED"),
		of("site2", call(2, t0.Add(2*time.Hour), "site2:201", "site2:202", "ANSWERED")),
		of("site_3", call(3, t0.Add(3*time.Hour), "site_3:201", "site_3:202", "ANSWERED")),
		of("siteX3", call(4, t0.Add(4*time.Hour), "siteX3:201", "siteX3:202", "ANSWERED"))))
	for _, tc := range []struct {
		pbxs []string
		want string
	}{
		{nil, "4,3,2,1"},
		{[]string{"site2"}, "2"},
		{[]string{""}, "1"},
		{[]string{"", "site2"}, "2,1"},
		{[]string{"site_3"}, "3"},
		{[]string{}, ""},
	} {
		q := window()
		q.PBXs = tc.pbxs
		var got []string
		for _, c := range all(t, s, q) {
			got = append(got, c.LinkedID[strings.IndexByte(c.LinkedID, '.')+1:])
		}
		if strings.Join(got, ",") != tc.want {
			t.Errorf("PBXs %q: calls %v, want %s", tc.pbxs, got, tc.want)
		}
	}
}

func testBadInput(t *testing.T, s *SQLStore) {
	for name, q := range map[string]Query{
		"no window":       {},
		"no to":           {From: t0},
		"to before from":  {From: t0, To: t0.Add(-time.Hour)},
		"empty window":    {From: t0, To: t0},
		"window too long": {From: t0, To: t0.Add(32 * 24 * time.Hour)},
		"bad direction":   {From: t0, To: t0.Add(time.Hour), Direction: "sideways"},
		"bad cursor":      {From: t0, To: t0.Add(time.Hour), Cursor: "!!"},
		"cursor no colon": {From: t0, To: t0.Add(time.Hour), Cursor: "YWJj"},
		"bad limit":       {From: t0, To: t0.Add(time.Hour), Limit: MaxLimit + 1},
		"long text":       {From: t0, To: t0.Add(time.Hour), Text: strings.Repeat("x", MaxText+1)},
	} {
		if _, err := s.Calls(ctx, q); !IsInvalid(err) {
			t.Errorf("%s: %v, want invalid", name, err)
		}
	}
	if err := s.Export(ctx, Query{}, func(CDR) error { return nil }); !IsInvalid(err) {
		t.Errorf("export without window: %v", err)
	}
}

// testPagingStable pages while new calls (newer) and new legs of calls
// already shown keep arriving: every call present at the start is seen
// exactly once.
func testPagingStable(t *testing.T, s *SQLStore) {
	var cdrs []CDR
	want := map[string]bool{}
	for i := range 60 {
		at := t0.Add(time.Duration(i/3) * time.Minute) // three calls per minute: ties on time
		c := call(i, at, "201", "202", "ANSWERED")
		want[c[0].LinkedID] = true
		cdrs = append(cdrs, c...)
	}
	mustInsert(t, s, cdrs)
	q := window()
	q.Limit = 7
	seen := map[string]int{}
	for n := 1000; ; n++ {
		p, err := s.Calls(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range p.Rows {
			seen[c.LinkedID]++
		}
		// Concurrent traffic: a new call, and another leg of a call
		// already paged past.
		mustInsert(t, s, call(n, t0.Add(23*time.Hour), "205", "206", "ANSWERED"))
		if len(p.Rows) > 0 {
			last := p.Rows[0]
			mustInsert(t, s, []CDR{{CallDate: time.Unix(last.Time, 0).Add(30 * time.Second), Src: "201", Dst: "203",
				Disposition: "ANSWERED", UniqueID: "extra" + last.LinkedID, LinkedID: last.LinkedID}})
		}
		if p.Next == nil {
			break
		}
		q.Cursor = *p.Next
	}
	for id := range want {
		if seen[id] != 1 {
			t.Errorf("call %s seen %d times", id, seen[id])
		}
	}
}

func testExport(t *testing.T, s *SQLStore) {
	var cdrs []CDR
	for i := range 300 {
		cdrs = append(cdrs, call(i, t0.Add(time.Duration(i)*time.Second), "201", "202", "NO ANSWER", "ANSWERED")...)
	}
	mustInsert(t, s, cdrs)
	n := 0
	var prev time.Time
	err := s.Export(ctx, window(), func(c CDR) error {
		if n > 0 && c.CallDate.After(prev) {
			return errors.New("not newest first")
		}
		prev = c.CallDate
		n++
		return nil
	})
	if err != nil || n != 600 {
		t.Fatalf("export: %d rows, %v", n, err)
	}
	stop := errors.New("stop")
	if err := s.Export(ctx, window(), func(CDR) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("export did not stop: %v", err)
	}
}

// replay feeds a recording's messages to fn.
func replay(t testing.TB, path string, fn func(ami.Message)) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := ami.NewReader(bufio.NewReader(f), ami.ReaderConfig{})
	if _, err := r.ReadBanner(); err != nil {
		t.Fatal(err)
	}
	for {
		m, err := r.ReadMessage()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		fn(m)
	}
}

// testRecordings records the real Asterisk recordings through a Recorder,
// twice (a reconnect or a replica), and checks the calls.
func testRecordings(t *testing.T, s *SQLStore) {
	files, _ := filepath.Glob("../ami/testdata/*.ami")
	if len(files) == 0 {
		t.Fatal("no recordings")
	}
	rec, err := NewRecorder(s, RecorderConfig{SpoolDir: t.TempDir(), Location: time.UTC})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { rec.Run(runCtx) })
	cdrs := 0
	for range 2 {
		for _, f := range files {
			replay(t, f, func(m ami.Message) {
				if m.Event() == "Cdr" {
					cdrs++
				}
				rec.Observe(m)
			})
		}
	}
	cancel()
	wg.Wait()
	if st := rec.Stats(); st.Seen != uint64(cdrs) || st.Written != uint64(cdrs) || st.Dropped != 0 || st.Pending != 0 {
		t.Fatalf("stats %+v, %d cdrs", st, cdrs)
	}
	q := Query{From: time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC), To: time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)} // both sets of recordings
	legs := 0
	calls := all(t, s, q)
	byID := map[string]Call{}
	for _, c := range calls {
		legs += len(c.Legs)
		byID[c.LinkedID] = c
	}
	if legs != cdrs/2 {
		t.Fatalf("%d legs stored, want %d (each once)", legs, cdrs/2)
	}
	// basic_call_caller_hangup: one leg, answered, 5 s of talk.
	if c := byID["1796028439.0"]; c.Disposition != "ANSWERED" || c.Billsec != 5 || c.Duration != 7 || c.CNAM != "Alice" || c.DstCNAM != "Bob" || c.Direction != DirInternal {
		t.Errorf("basic call: %+v", c)
	}
	// queue_answered: the two ringing legs are one call, answered.
	// Its queue is app_queue's "support" (Queue(support,...) in LastData),
	// as the live state names it, not the dialled 600.
	if c := byID["1796028496.10"]; len(c.Legs) != 2 || c.Disposition != "ANSWERED" || c.Direction != DirIn || c.Queue != "support" {
		t.Errorf("queue call: %+v", c)
	}
	// attended transfer: 201's legs and the Local channels pair up with
	// the consultation call through the channels' Linkedid.
	if c := byID["1796028590.27"]; len(c.Legs) < 3 {
		t.Errorf("transfer call: %d legs: %+v", len(c.Legs), c)
	}
	t.Logf("%d cdrs -> %d calls", cdrs/2, len(calls))
}
