package loadtest

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestE2EChild: a child bridge process (this test binary, as
// TestE2EChildHelper) tells its parent where the bridge is, answers each
// channels request with the PBX's channels of that moment, and exits
// cleanly when the parent stops it; a child that says nothing sensible is
// a clear error.
func TestE2EChild(t *testing.T) {
	t.Setenv("LOADTEST_E2E_CHILD", "serve")
	ctx := context.Background()
	c, err := StartE2EChild(ctx, os.Args[0], []string{"-test.run=^TestE2EChildHelper$"}, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	if c.SIP != "127.0.0.1:5060" || c.HTTP != "http://127.0.0.1:8080" || c.Token != "tok" || !slices.Equal(c.Exts, []string{"3000", "3001"}) || c.PID <= 0 {
		t.Errorf("child said %+v", c)
	}
	if cpu := procCPU(c.PID); cpu < 0 {
		t.Errorf("procCPU(%d) = %v", c.PID, cpu)
	}
	for i, want := range [][]string{{}, {"PJSIP/3000-00000001"}, {"PJSIP/3000-00000001", "PJSIP/3001-00000002"}} {
		if got := c.Channels(); got == nil || !slices.Equal(got, want) {
			t.Errorf("request %d: channels %q, want %q", i, got, want)
		}
	}
	if err := c.Stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
	if got := c.Channels(); got != nil {
		t.Errorf("channels after stop: %q", got)
	}
	if c.Stop() != nil {
		t.Error("a second stop failed")
	}

	t.Setenv("LOADTEST_E2E_CHILD", "garbage")
	if _, err := StartE2EChild(ctx, os.Args[0], []string{"-test.run=^TestE2EChildHelper$"}, os.Stderr); err == nil || !strings.Contains(err.Error(), "first line") {
		t.Errorf("a child writing garbage: %v", err)
	}
	if _, err := StartE2EChild(ctx, "/nonexistent/ctibridge", nil, os.Stderr); err == nil {
		t.Error("a missing binary started")
	}
}

// TestE2EChildHelper is the child of TestE2EChild (it does nothing
// otherwise): the third channels request sees a call more than the
// second, which sees one more than the first.
func TestE2EChildHelper(t *testing.T) {
	switch os.Getenv("LOADTEST_E2E_CHILD") {
	case "serve":
	case "garbage":
		os.Stdout.WriteString("PASS, and not JSON\n")
		time.Sleep(100 * time.Millisecond)
		os.Exit(0)
	default:
		t.Skip("the child of TestE2EChild")
	}
	var n int
	chans := func() []string {
		all := []string{"PJSIP/3000-00000001", "PJSIP/3001-00000002"}
		n++
		return all[:min(n-1, len(all))]
	}
	err := ServeE2EBridge(context.Background(), E2EBridge{SIP: "127.0.0.1:5060", HTTP: "http://127.0.0.1:8080", Token: "tok", Exts: []string{"3000", "3001"}},
		chans, os.Stdin, os.Stdout)
	if err != nil {
		os.Exit(3)
	}
	os.Exit(0)
}
