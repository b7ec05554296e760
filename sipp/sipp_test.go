package sipp

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestArgs(t *testing.T) {
	got := Args(Options{Scenario: "uas.xml", LocalPort: 5202, Calls: 50, Rate: 10, Duration: 3 * time.Second,
		Set: map[string]string{"ringtime": "300", "holdtime": "0"}, Timeout: 30 * time.Second}, "/tmp/s.csv")
	want := []string{"-sf", filepath.Join(Dir(), "uas.xml"), "-i", "127.0.0.1", "-p", "5202", "-mp", "15202",
		"-m", "50", "-r", "10", "-d", "3000", "-set", "holdtime", "0", "-set", "ringtime", "300",
		"-timeout", "31s", "-timeout_error", "-nostdin", "-trace_err", "-trace_stat", "-stf", "/tmp/s.csv", "-fd", "1"}
	if !slices.Equal(got, want) {
		t.Errorf("Args:\n got %q\nwant %q", got, want)
	}
	got = Args(Options{Scenario: "/x/uac.xml", Remote: "127.0.0.1:5060", LocalPort: 6000, Service: "600", Transport: "t1"}, "s")
	if got[0] != "127.0.0.1:5060" || !slices.Contains(got, "/x/uac.xml") || !slices.Contains(got, "t1") || !slices.Contains(got, "600") {
		t.Errorf("client Args: %q", got)
	}
}

func TestParseStat(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "stat.csv")
	head := "StartTime;LastResetTime;CurrentTime;ElapsedTime(P);ElapsedTime(C);TargetRate;CallRate(P);CallRate(C);TotalCallCreated;CurrentCall;SuccessfulCall(P);SuccessfulCall(C);FailedCall(P);FailedCall(C);Retransmissions(C);"
	os.WriteFile(p, []byte(head+"\n"+strings.Repeat("x;", 8)+"40;3;1;37;0;3;2;\n"+strings.Repeat("x;", 8)+"50;0;0;48;0;2;5;\n"), 0o644)
	var r Result
	if err := parseStat(p, &r); err != nil {
		t.Fatal(err)
	}
	if r.Created != 50 || r.Successful != 48 || r.Failed != 2 || r.Retrans != 5 || r.FailureRatio() != 0.04 {
		t.Errorf("parsed %+v", r)
	}
	if err := parseStat(filepath.Join(dir, "none"), &r); err == nil {
		t.Error("missing file parsed")
	}
}

func TestScenariosPresent(t *testing.T) {
	for _, f := range []string{"register_client.xml", "register_client.csv", "register_invite_client.xml",
		"register_invite_client.csv", "uac.xml", "uas.xml", "uas_busy.xml",
		"uac_cancel.xml", "uac_noack.xml", "uac_vanish.xml", "uac_timeout.xml"} {
		if _, err := os.Stat(ScenarioPath(f)); err != nil {
			t.Error(err)
		}
	}
}

// needSIPp skips the test when sipp is missing (scripts/test.sh installs
// it, so in CI it runs).
func needSIPp(t *testing.T) {
	t.Helper()
	if _, err := LookPath(""); err != nil {
		t.Skip(err)
	}
}

// TestRunFatalSaysWhy: sipp that cannot bind its media port exits 254; the
// error says so in sipp's words.
func TestRunFatalSaysWhy(t *testing.T) {
	needSIPp(t)
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	busy, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", port+10000))
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	res, err := Run(context.Background(), Options{Scenario: "uac.xml", Remote: "127.0.0.1:9", LocalPort: port, Calls: 1, Timeout: 5 * time.Second})
	if res.ExitCode != exitBind || err == nil || !strings.Contains(err.Error(), "Unable to bind audio RTP socket") {
		t.Errorf("exit %d, err %v", res.ExitCode, err)
	}
}

// TestRunRetriesBind: when a port Run chose is taken before sipp binds it
// (exit 254, no call placed), Run tries another.
func TestRunRetriesBind(t *testing.T) {
	needSIPp(t)
	var busy net.PacketConn
	calls := 0
	freePort = func() (int, error) {
		calls++
		p, err := FreePort()
		if err == nil && calls == 1 {
			busy, err = net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", p+10000))
		}
		return p, err
	}
	defer func() { freePort = FreePort }()
	defer func() {
		if busy != nil {
			busy.Close()
		}
	}()
	// A UAS that never gets a call: it ends at the timeout, not with 254.
	res, err := Run(context.Background(), Options{Scenario: "uas.xml", Calls: 1, Timeout: 1 * time.Second})
	if calls != 2 || res.ExitCode == exitBind {
		t.Errorf("%d ports tried, exit %d, err %v", calls, res.ExitCode, err)
	}
}

func TestTailLastLine(t *testing.T) {
	w := &tailWriter{max: 256}
	w.Write([]byte("x\n2026-12-01\t21:52:56.4\t1796.4: first\n"))
	w.Write([]byte("2026-12-01\t21:52:56.6\t1796.6: Aborting call, received 'SIP/2.0 481 Nope\nVia: x\n'\n"))
	if got := w.lastLine(); got != "Aborting call, received 'SIP/2.0 481 Nope" {
		t.Errorf("lastLine %q", got)
	}
	w.Write([]byte(strings.Repeat("y", 300)))
	if len(w.b) != 256 {
		t.Errorf("kept %d bytes", len(w.b))
	}
	if got := (&tailWriter{max: 8, b: []byte("plain\n")}).lastLine(); got != "plain" {
		t.Errorf("unstamped: %q", got)
	}
}
