package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/ami/amitest"
	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/dbtest"
)

// TestServeWithDatabaseDown starts `ctibridge serve` with its PostgreSQL
// stopped: the bridge serves the live state and is ready (the PBX link
// is what readiness means), says the store is not reached in /readyz and
// the metrics, answers history and phonebook with 503; the CDRs of calls
// that end meanwhile wait in the spool. The bridge is restarted during
// the outage (what systemd does), more calls end; then the database
// starts: without another restart the routes work and every CDR, from
// before and after the restart, is in the database exactly once. Then a
// second outage while running: the same.
func TestServeWithDatabaseDown(t *testing.T) {
	cluster, dsn := dbtest.NewCluster(t)
	if err := cluster.Stop(); err != nil {
		t.Fatal(err)
	}
	srv := amitest.NewServer(t)
	var cdr ami.Message
	for _, m := range amitest.ReadRecording(t, "../../ami/testdata/basic_call_caller_hangup.ami") {
		if m.Event() == "Cdr" {
			cdr = m
		}
	}
	hash, err := auth.HashPassword("alice-pw", 4)
	if err != nil {
		t.Fatal(err)
	}
	users := writeFile(t, "users.yaml", "users:\n  - username: alice\n    name: Alice\n    password_hash: \""+hash+"\"\n    endpoints: [\"201\"]\n")
	env := map[string]string{"CTIBRIDGE_AMI_SECRET": amitest.Secret, "CTIBRIDGE_USERS": users, "CTIBRIDGE_DB": dsn}
	// Each start listens on port 0 and the test reads the addresses again
	// from that bridge's "ctibridge serving" line: a port found free
	// beforehand could be taken by another test process before serve
	// listens on it. The restart need not keep the first addresses (the
	// data directory, spool and database are what it resumes; the test
	// logs in again), so it takes new ones rather than race for the old.
	args := []string{"serve", "--ami", srv.Addr(), "--ami-user", amitest.User, "--admin", "127.0.0.1:0", "--http", "127.0.0.1:0", "--data-dir", t.TempDir()}

	var logs *syncBuffer  // the running bridge's
	var admin, api string // its addresses
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; logs:\n%s", what, logs.String())
			}
		}
	}
	// start runs the bridge until the returned function stops it.
	start := func() func() {
		logs = &syncBuffer{}
		out := logs
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- run(ctx, args, sysIO{func(k string) string { return env[k] }, nil, io.Discard, out}) }()
		a, err := serveReady(out, done, 60*time.Second)
		if err != nil {
			cancel()
			t.Fatalf("%v with the database down; logs:\n%s", err, out.String())
		}
		admin, api = a.Admin, a.HTTP
		return func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("serve: %v", err)
				}
			case <-time.After(20 * time.Second):
				t.Error("serve did not stop")
			}
		}
	}
	var token string
	login := func() {
		resp, err := http.Post("http://"+api+"/auth/login", "application/json", strings.NewReader(`{"username":"alice","password":"alice-pw"}`))
		if err != nil {
			t.Fatal(err)
		}
		var l struct{ Token string }
		json.NewDecoder(resp.Body).Decode(&l)
		resp.Body.Close()
		if token = l.Token; token == "" {
			t.Fatalf("login: %d", resp.StatusCode)
		}
	}
	do := func(path string) (int, string) {
		req, _ := http.NewRequest("GET", "http://"+api+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	metricsHave := func(want ...string) bool {
		_, m := get(t, "http://"+admin+"/metrics")
		for _, w := range want {
			if !strings.Contains(m, w) {
				return false
			}
		}
		return true
	}
	// sendCdrs ends n calls (their Cdr events), numbered from first.
	sendCdrs := func(first, n int) {
		for i := range n {
			srv.Broadcast(cdr.Set("UniqueID", "1796028439."+strconv.Itoa(first+i)))
		}
	}
	const historyPath = "/historycall/interval/user/alice/20261129/20261201?limit=500"

	stop := start()
	if _, body := get(t, "http://"+admin+"/readyz"); !strings.Contains(body, "store: starting") {
		t.Errorf("/readyz does not say the store is not reached:\n%s", body)
	}
	if !metricsHave("ctibridge_store_up 0") {
		t.Error("metrics lack ctibridge_store_up 0")
	}
	login()
	if code, _ := do("/astproxy/extensions"); code != http.StatusOK {
		t.Errorf("live state with the database down: %d", code)
	}
	for _, p := range []string{historyPath, "/phonebook/search/rossi"} {
		if code, body := do(p); code != http.StatusServiceUnavailable || !strings.Contains(body, "store_unavailable") {
			t.Errorf("GET %s with the database down: %d %s, want 503 store_unavailable", p, code, body)
		}
	}
	sendCdrs(1000, 40)
	waitFor("the CDRs in the spool", func() bool { return metricsHave("ctibridge_cdr_spooled_total 40", "ctibridge_cdr_pending 40") })
	firstLogs := logs

	// Restarted during the outage: the spool is resumed, more calls end.
	stop()
	stop = start()
	defer func() { stop() }()
	if _, body := get(t, "http://"+admin+"/readyz"); !strings.Contains(body, "cdrs waiting in the spool: 40") {
		t.Errorf("/readyz after the restart does not count the spool:\n%s", body)
	}
	login()
	sendCdrs(2000, 20)
	waitFor("the new CDRs in the spool", func() bool { return metricsHave("ctibridge_cdr_spooled_total 20", "ctibridge_cdr_pending 60") })

	const calls = 60
	if err := cluster.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor("the history to answer with every call", func() bool {
		code, body := do(historyPath)
		return code == http.StatusOK && strings.Contains(body, `"count":`+strconv.Itoa(calls)+`,`)
	})
	if code, body := do("/phonebook/search/rossi"); code != http.StatusOK {
		t.Errorf("phonebook once the database is up: %d %s", code, body)
	}
	waitFor("/readyz to say the store is up", func() bool {
		_, body := get(t, "http://"+admin+"/readyz")
		return strings.Contains(body, "store: up; cdrs waiting in the spool: 0")
	})
	if !metricsHave("ctibridge_store_up 1", "ctibridge_cdr_dropped_total 0", "ctibridge_cdr_written_total 60") {
		_, m := get(t, "http://"+admin+"/metrics")
		t.Errorf("metrics after the outage:\n%s", grepLines(m, "ctibridge_cdr_", "ctibridge_store_"))
	}

	// A second outage, while running: 503 again, CDRs to the spool, and
	// everything back when the database is.
	if err := cluster.Stop(); err != nil {
		t.Fatal(err)
	}
	waitFor("the history to answer 503 again", func() bool { code, _ := do(historyPath); return code == http.StatusServiceUnavailable })
	sendCdrs(3000, 10)
	waitFor("the CDRs of the second outage in the spool", func() bool { return metricsHave("ctibridge_cdr_spooled_total 30", "ctibridge_cdr_pending 10") })
	if err := cluster.Start(); err != nil {
		t.Fatal(err)
	}
	const all = calls + 10
	waitFor("the history to answer with every call again", func() bool {
		code, body := do(historyPath)
		return code == http.StatusOK && strings.Contains(body, `"count":`+strconv.Itoa(all)+`,`)
	})

	// Exactly once, in the database itself.
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var rows, distinct int
	if err := conn.QueryRow(context.Background(), `SELECT count(*), count(DISTINCT uniqueid) FROM cdr`).Scan(&rows, &distinct); err != nil {
		t.Fatal(err)
	}
	if rows != all || distinct != all {
		t.Errorf("%d rows, %d distinct uniqueids in cdr; want %d and %d", rows, distinct, all, all)
	}
	// Each bridge logs each outage once when it starts and once when it
	// ends, not for every request or CDR it failed.
	for i, l := range []string{firstLogs.String(), logs.String()} {
		if strings.Count(l, `msg="database unavailable"`) != i+1 || strings.Count(l, `msg="database back"`) != 2*i || strings.Contains(l, "request failed") {
			t.Errorf("bridge %d does not log the outage once:\n%s", i+1, grepLines(l, "unavailable", "database", "request failed"))
		}
	}
}

// grepLines returns the lines of s holding any of subs.
func grepLines(s string, subs ...string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		for _, sub := range subs {
			if strings.Contains(l, sub) {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}
