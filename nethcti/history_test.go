package nethcti

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami/amitest"
	"github.com/ctibridge/ctibridge/history"
)

// historyFixture serves the call history of the recorded Cdr events of
// load_10_calls_5cps (ten answered inbound calls on 2026-11-30, three of
// them to 201) and status_actions_during_call (201 calling 202, and a
// queue caller who hung up unanswered).
func historyFixture(t *testing.T) *fixture {
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "h.db")+"?_pragma=busy_timeout(10000)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := history.Schema.MigrateSQLite(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	st := history.NewSQLite(db, history.Config{})
	var cdrs []history.CDR
	for _, rec := range []string{"load_10_calls_5cps", "status_actions_during_call"} {
		for _, m := range amitest.ReadRecording(t, "testdata/"+rec+".ami") {
			if m.Get("Event") != "Cdr" {
				continue
			}
			if c, ok := history.FromEvent(m, time.UTC, nil); ok {
				cdrs = append(cdrs, c)
			}
		}
	}
	if len(cdrs) != 13 {
		t.Fatalf("%d CDRs in the recordings, want 13", len(cdrs))
	}
	if err := st.Insert(context.Background(), cdrs); err != nil {
		t.Fatal(err)
	}
	return newFixtureHistory(t, st)
}

type histPage struct {
	Count int
	Next  *string
	Rows  []map[string]any
}

func linkedIDs(p histPage) []any {
	var out []any
	for _, r := range p.Rows {
		out = append(out, r["linkedid"])
	}
	return out
}

// TestHistoryCalls: the web app's /history/calls (nethvoice-cti
// lib/history.ts search) pages as the native cursor pages, with
// NethCTI's row fields and the native permissions.
func TestHistoryCalls(t *testing.T) {
	f := historyFixture(t)
	const window = "from=20261101&to=20261231"
	var native1, native2, front1, front2 histPage
	json.Unmarshal(f.nativeDo("GET", "/historycall/interval/user/alice/20261101/20261231?limit=2", "alice", "").body, &native1)
	if native1.Next == nil || len(native1.Rows) != 2 {
		t.Fatalf("native page: %+v", native1)
	}
	json.Unmarshal(f.nativeDo("GET", "/historycall/interval/user/alice/20261101/20261231?limit=2&cursor="+*native1.Next, "alice", "").body, &native2)
	r1 := f.apiDo("GET", "/history/calls?callType=user&username=alice&"+window+"&textSearch=&sort=time%2520desc&direction=all&pageNum=1&pageSize=2&artifact=all", "alice", "")
	r2 := f.apiDo("GET", "/history/calls?callType=user&username=alice&"+window+"&pageNum=2&pageSize=2", "alice", "")
	if r1.status != 200 || r2.status != 200 {
		t.Fatalf("pages: %d %s; %d %s", r1.status, r1.body, r2.status, r2.body)
	}
	json.Unmarshal(r1.body, &front1)
	json.Unmarshal(r2.body, &front2)
	// Alice's calls: three from the load recording, one to Bob.
	if front1.Count != 4 || len(front1.Rows) != 2 || front2.Count != 4 || len(front2.Rows) != 2 {
		t.Errorf("pages: count %d rows %d, count %d rows %d, want 4 and 2", front1.Count, len(front1.Rows), front2.Count, len(front2.Rows))
	}
	if a, b := linkedIDs(front1), linkedIDs(native1); !jsonEqual(a, b) {
		t.Errorf("page 1 %v, native %v", a, b)
	}
	if a, b := linkedIDs(front2), linkedIDs(native2); !jsonEqual(a, b) {
		t.Errorf("page 2 %v, native %v", a, b)
	}
	for _, field := range []string{"time", "src", "dst", "cnum", "cnam", "ccompany", "dst_cnam", "dst_ccompany", "direction",
		"duration", "billsec", "disposition", "uniqueid", "linkedid", "recordingfile", "channel", "dstchannel"} {
		if !hasPath(map[string]any{"r": front1.Rows[0]}, "r."+field) {
			t.Errorf("no %s in %v", field, front1.Rows[0])
		}
	}
	// The native permissions.
	for _, c := range []struct {
		user, query string
		status      int
	}{
		{"carol", "callType=user&username=alice&" + window, 403},
		{"alice", "callType=switchboard&" + window, 403},
		{"root", "callType=switchboard&" + window, 200},
		{"alice", "callType=user&username=alice&from=2026&to=20261231", 400},
		{"alice", "callType=user&username=alice&" + window + "&sort=time%20asc", 501},
	} {
		if r := f.apiDo("GET", "/history/calls?"+c.query, c.user, ""); r.status != c.status {
			t.Errorf("%s %s: %d %s, want %d", c.user, c.query, r.status, r.body, c.status)
		}
	}
	// Lost calls: inbound and not answered (the queue caller).
	var lost histPage
	r := f.apiDo("GET", "/history/calls?callType=switchboard&"+window+"&direction=lost&pageNum=1&pageSize=10", "root", "")
	json.Unmarshal(r.body, &lost)
	if r.status != 200 || lost.Count != 1 || len(lost.Rows) != 1 || lost.Rows[0]["disposition"] == "ANSWERED" || lost.Rows[0]["src"] != "0655501234" {
		t.Errorf("lost calls: %d %s", r.status, r.body)
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}
