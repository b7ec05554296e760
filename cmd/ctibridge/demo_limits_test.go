package main

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"
)

// TestDemoPortTaken: when the panel's port is held by another program the
// demo says which flag moves it.
func TestDemoPortTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, c := range []struct{ flag, want string }{{"http", "--http"}, {"admin", "--admin"}, {"sip", "--sip"}, {"ami", "--ami"}} {
		cfg := demoConfig{http: "127.0.0.1:0", admin: "127.0.0.1:0", sip: "127.0.0.1:0", ami: "127.0.0.1:0", phones: 3, dataDir: t.TempDir()}
		switch c.flag {
		case "http":
			cfg.http = ln.Addr().String()
		case "admin":
			cfg.admin = ln.Addr().String()
		case "ami":
			cfg.ami = ln.Addr().String()
		case "sip":
			// SIP is UDP and TCP: hold the UDP port too.
			pc, err := net.ListenPacket("udp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer pc.Close()
			cfg.sip = pc.LocalAddr().String()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err := runDemo(ctx, cfg, slog.New(slog.DiscardHandler), func(demoInfo) { t.Errorf("%s: the demo started on a taken port", c.flag) })
		cancel()
		if err == nil || !strings.Contains(err.Error(), "in use") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--%s taken: %v, want the words \"in use\" and %s", c.flag, err, c.want)
		}
	}
}

// TestDemoPhones: --phones goes past 99 up to 399 (201-599, below the
// queue's 600); beyond, a clear error.
func TestDemoPhones(t *testing.T) {
	err := runDemo(context.Background(), demoConfig{phones: 400}, slog.New(slog.DiscardHandler), nil)
	if err == nil || !strings.Contains(err.Error(), "between 3 and 399") {
		t.Errorf("--phones 400: %v", err)
	}
	if testing.Short() {
		t.Skip("150 phones: not in -short")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	info := make(chan demoInfo, 1)
	done := make(chan error, 1)
	c := demoConfig{http: "127.0.0.1:0", admin: "127.0.0.1:0", sip: "127.0.0.1:0", ami: "127.0.0.1:0", phones: 150, dataDir: t.TempDir()}
	go func() { done <- runDemo(ctx, c, slog.New(slog.DiscardHandler), func(d demoInfo) { info <- d }) }()
	var d demoInfo
	select {
	case d = <-info:
	case err := <-done:
		t.Fatalf("150 phones: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("150 phones: the demo did not start")
	}
	admin := restLogin(t, d.URL, "admin", "admin")
	pollREST(t, d.URL, admin, "/astproxy/extensions", "150 extensions, 350 registered", func(xs map[string]struct{ Status string }) bool {
		_, last := xs["350"]
		return len(xs) == 150 && last && xs["350"].Status == "online"
	})
	cancel()
	<-done
}
