package pbxsim

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/sipp"
)

// needSIPp skips the test when sipp is missing. Tests install nothing:
// scripts/test.sh (CI) installs Debian's sip-tester first, so there it
// always runs.
func needSIPp(t *testing.T) {
	t.Helper()
	if _, err := sipp.LookPath(""); err != nil {
		t.Skipf("sipp is not installed (Debian: sip-tester; scripts/test.sh installs it): %v", err)
	}
}

// TestSIPpEndToEnd: SIPp phones 201-210 register and answer (one uas.xml
// instance); a SIPp register+invite client places 50 calls at 10 calls/s
// from 211-220 to them. The AMI stream, through calls.Engine, must show
// the right counterparts and directions while calls are up and no ghost
// calls once they end.
func TestSIPpEndToEnd(t *testing.T) {
	needSIPp(t)
	p := startPBX(t, Config{})
	capt := startCapture(t, p.AMIAddr())
	dir := t.TempDir()
	var regCSV, callCSV strings.Builder
	regCSV.WriteString("SEQUENTIAL\n")
	callCSV.WriteString("SEQUENTIAL\n")
	names := map[string]string{}
	var exts []string
	peer := map[string]string{}
	for i := 1; i <= 10; i++ {
		callee, caller := fmt.Sprint(200+i), fmt.Sprint(210+i)
		fmt.Fprintf(&regCSV, "%s;;;3600\n", callee)
		fmt.Fprintf(&callCSV, "%s;%s;\n", caller, callee)
		peer[caller], peer[callee] = callee, caller
		exts = append(exts, callee, caller)
	}
	for _, e := range exts {
		names[e] = p.names[e]
	}
	regFile, callFile := filepath.Join(dir, "reg.csv"), filepath.Join(dir, "calls.csv")
	os.WriteFile(regFile, []byte(regCSV.String()), 0o644)
	os.WriteFile(callFile, []byte(callCSV.String()), 0o644)

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	uasPort, err := sipp.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	res, err := sipp.Run(ctx, sipp.Options{Scenario: "register_client.xml", Remote: p.SIPAddr(), LocalPort: uasPort,
		InjectionFile: regFile, Calls: 10, Rate: 100, Timeout: 10 * time.Second})
	if err != nil || res.Successful != 10 {
		t.Fatalf("register: %+v %v", res, err)
	}
	uasDone := make(chan sipp.Result, 1)
	go func() {
		r, err := sipp.Run(ctx, sipp.Options{Scenario: "uas.xml", LocalPort: uasPort, Calls: 50,
			Set: map[string]string{"ringtime": "300", "holdtime": "0"}, Timeout: 45 * time.Second})
		if err != nil {
			t.Error(err)
		}
		uasDone <- r
	}()
	time.Sleep(300 * time.Millisecond) // let the UAS bind
	uacDone := make(chan sipp.Result, 1)
	go func() {
		r, err := sipp.Run(ctx, sipp.Options{Scenario: "register_invite_client.xml", Remote: p.SIPAddr(),
			InjectionFile: callFile, Calls: 50, Rate: 10, Limit: 100, Duration: 3 * time.Second, Timeout: 45 * time.Second,
			Dir: os.Getenv("PBXSIM_SIPP_DIR"), TraceMessages: os.Getenv("PBXSIM_SIPP_DIR") != ""})
		if err != nil {
			t.Error(err)
		}
		uacDone <- r
	}()

	// While calls are up: every conversation has the right counterpart and
	// direction.
	msgs := capt.waitFor(t, "20 calls up", func(m []ami.Message) bool { return count(m, "BridgeEnter") >= 40 })
	up := stateOf(t, msgs, names, exts, false)
	connected := 0
	for x, v := range up {
		for _, c := range v.Convs {
			parts := strings.Split(c, ":")
			wantDir := "out"
			if x <= "210" {
				wantDir = "in"
			}
			if parts[0] != wantDir || parts[1] != peer[x] {
				t.Errorf("%s: conversation %s, want direction %s with %s", x, c, wantDir, peer[x])
			}
			if parts[2] == "true" {
				connected++
			}
		}
	}
	if connected < 20 {
		t.Errorf("only %d connected conversations while calls are up: %v", connected, up)
	}

	uac, uas := <-uacDone, <-uasDone
	if uac.Successful != 50 || uac.Failed != 0 {
		t.Errorf("SIPp client: %d successful, %d failed of %d (%s)", uac.Successful, uac.Failed, uac.Created, uac.Errors)
	}
	if uas.Successful != 50 || uas.Failed != 0 {
		t.Errorf("SIPp phones: %d successful, %d failed of %d (%s)", uas.Successful, uas.Failed, uas.Created, uas.Errors)
	}
	waitNoChannels(t, p)
	msgs = capt.waitFor(t, "100 hangups", func(m []ami.Message) bool { return count(m, "Hangup") == 100 })
	if n := count(msgs, "Cdr", "Disposition", "ANSWERED"); n != 50 {
		t.Errorf("%d ANSWERED CDRs, want 50", n)
	}
	for x, v := range stateOf(t, msgs, names, exts, false) {
		if len(v.Convs) != 0 || v.Status != "online" {
			t.Errorf("after the calls: %s is %s with %v", x, v.Status, v.Convs)
		}
	}
}
