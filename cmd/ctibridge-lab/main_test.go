package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// testBin is the ctibridge binary TestMain built for the runs that start
// a bridge ("" under -short, where they skip).
var testBin string

// testBridgeRun starts testBin's bridges at log level error.
var testBridgeRun bridgeRun

// testEnv is the environment the tests give the command: testBin as
// $CTIBRIDGE_BIN.
func testEnv(k string) string {
	if k == "CTIBRIDGE_BIN" {
		return testBin
	}
	return ""
}

// TestMain builds ctibridge once (with -race under go test -race) into a
// temporary directory, for every run that starts it, and lets a test run
// this test binary as the lab command (the child PBX process of loadtest
// e2e) when CTIBRIDGE_TEST_MAIN is set.
func TestMain(m *testing.M) {
	if os.Getenv("CTIBRIDGE_TEST_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "ctibridge-lab-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testBin = filepath.Join(dir, "ctibridge")
	testBridgeRun = bridgeRun{bin: testBin, logLevel: "error", stderr: os.Stderr}
	build := []string{"build", "-o", testBin}
	if chaosRace {
		build = append(build, "-race") // reuses the test's race-built packages
	}
	if out, err := exec.Command("go", append(build, "../ctibridge")...).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build ctibridge: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
