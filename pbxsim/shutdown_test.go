package pbxsim

import (
	"context"
	"testing"
	"time"
)

// TestShutdownWithCallsUp: stopping the simulator with calls up sends BYE
// to every leg and returns promptly (the target is under 1 s; the bound
// here is loose for a loaded machine under -race).
func TestShutdownWithCallsUp(t *testing.T) {
	p, err := New(Config{SIPAddr: "127.0.0.1:0", AMIAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	alice := startPhone(t, p, PhoneConfig{Exten: "201"})
	bob := startPhone(t, p, PhoneConfig{Exten: "202"})
	carol := startPhone(t, p, PhoneConfig{Exten: "203"})
	cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer ccancel()
	ab, err := alice.Call(cctx, "202")
	if err != nil {
		t.Fatal(err)
	}
	ba := <-bob.Answered()
	c6, err := carol.Call(cctx, "601")
	if err != nil {
		t.Fatal(err)
	}
	for len(p.Channels()) < 3 {
		time.Sleep(10 * time.Millisecond)
	}

	start := time.Now()
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	took := time.Since(start)
	t.Logf("shutdown with 3 channels up took %v", took)
	if took > 4*time.Second {
		t.Errorf("shutdown took %v", took)
	}
	for name, c := range map[string]*PhoneCall{"alice": ab, "bob": ba, "carol": c6} {
		select {
		case <-c.Done():
		case <-time.After(2 * time.Second):
			t.Errorf("%s's call got no BYE", name)
		}
	}
}
