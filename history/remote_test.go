package history

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/upstream"
)

// TestRemote serves a SQLite store's calls and CSV the way rest does and
// reads them back through a Remote over an upstream.Client.
func TestRemote(t *testing.T) {
	ctx := context.Background()
	s := NewSQLite(openSQLite(t), Config{})
	day := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	var cdrs []CDR
	for i, src := range []string{"2000", "=cmd", "0721405516"} {
		id := "1772441000." + string(rune('0'+i))
		cdrs = append(cdrs, CDR{CallDate: day.Add(time.Duration(i) * time.Minute), Src: src, Dst: "2001", Disposition: "ANSWERED",
			Duration: 10, Billsec: 8, UniqueID: id, LinkedID: id, CLID: `"Al" <` + src + `>`, Channel: "PJSIP/" + src})
	}
	if err := s.Insert(ctx, cdrs); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.URL.RequestURI()+" as "+r.Header.Get("X-CTI-User"))
		mu.Unlock()
		q := Query{From: day.Truncate(24 * time.Hour), To: day.Truncate(24*time.Hour).AddDate(0, 0, 1), Cursor: r.URL.Query().Get("cursor"), Direction: r.URL.Query().Get("direction")}
		if r.URL.Query().Get("direction") == "sideways" {
			w.WriteHeader(400)
			json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": "bad_request", "message": "direction: no"}})
			return
		}
		if strings.HasSuffix(r.URL.Path, "/csv") {
			ExportCSV(r.Context(), s, q, w, time.UTC, nil, 0)
			return
		}
		q.Limit = 2
		p, err := s.Calls(r.Context(), q)
		if err != nil {
			t.Error(err)
		}
		json.NewEncoder(w).Encode(p)
	}))
	defer srv.Close()
	c, err := upstream.New(upstream.Config{URLs: []string{srv.URL + "/cti"}})
	if err != nil {
		t.Fatal(err)
	}
	r := NewRemote(c, RemoteConfig{})
	q := Query{From: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), To: time.Date(2026, 3, 3, 0, 0, 0, 0, time.UTC), User: "alice", Viewer: "alice", Limit: 2}
	p, err := r.Calls(ctx, q)
	if err != nil || len(p.Rows) != 2 || p.Next == nil {
		t.Fatalf("page 1: %+v %v", p, err)
	}
	want, _ := s.Calls(ctx, Query{From: day.Truncate(24 * time.Hour), To: day.Truncate(24*time.Hour).AddDate(0, 0, 1), Limit: 2})
	if !reflect.DeepEqual(p, want) {
		t.Fatalf("remote page %+v, want %+v", p, want)
	}
	q.Cursor = *p.Next
	if p, err = r.Calls(ctx, q); err != nil || len(p.Rows) != 1 || p.Next != nil {
		t.Fatalf("page 2: %+v %v", p, err)
	}
	sw := Query{From: q.From, To: q.To, Viewer: "root"}
	var got []CDR
	if err := r.Export(ctx, sw, func(c CDR) error { got = append(got, c); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[1].Src != "=cmd" || got[1].CLID != `"Al" <=cmd>` || !got[2].CallDate.Equal(cdrs[0].CallDate) || got[0].Billsec != 8 {
		t.Fatalf("export: %+v", got)
	}
	sw.Direction = "sideways"
	if _, err := r.Calls(ctx, sw); !IsInvalid(err) || !strings.Contains(err.Error(), "direction: no") {
		t.Fatalf("400: %v", err)
	}
	if err := r.Insert(ctx, cdrs); !errors.Is(err, ErrReadOnly) {
		t.Fatal(err)
	}
	// Some PBXs' calls only: refused, nothing asked of the remote.
	sw.Direction, sw.PBXs = "", []string{"site2"}
	if _, err := r.Calls(ctx, sw); !errors.Is(err, ErrPBXFilter) {
		t.Fatalf("PBXs: %v", err)
	}
	wantSeen := []string{
		"/cti/historycall/interval/user/alice/20260301/20260302?limit=2 as alice",
		"/cti/historycall/interval/user/alice/20260301/20260302?cursor=" + q.Cursor + "&limit=2 as alice",
		"/cti/histcallswitch/interval/20260301/20260302/csv as root",
		"/cti/histcallswitch/interval/20260301/20260302?direction=sideways as root",
	}
	if !reflect.DeepEqual(seen, wantSeen) {
		t.Fatalf("requests:\n%s\nwant\n%s", strings.Join(seen, "\n"), strings.Join(wantSeen, "\n"))
	}
}
