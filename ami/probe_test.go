package ami_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/pbxsim"
)

// TestProbe holds Probe's answers against pbxsim's manager (the right
// and a wrong secret, plain and MD5), a port nobody listens on, a TCP
// listener that says something else, and one that says nothing.
func TestProbe(t *testing.T) {
	sim, err := pbxsim.New(pbxsim.Config{SIPAddr: "127.0.0.1:0", AMIAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { sim.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	dead := listen(t, nil) // closed at once: nothing listens there
	dead.Close()
	var sentLogin atomic.Bool // the peer that is not AMI was sent the credentials
	http := listen(t, func(c net.Conn) {
		c.Write([]byte("HTTP/1.1 400 Bad Request\r\n\r\n"))
		c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		b, _ := io.ReadAll(c)
		sentLogin.Store(sentLogin.Load() || strings.Contains(string(b), "Login"))
	})
	silent := listen(t, func(c net.Conn) { time.Sleep(5 * time.Second) })
	user, secret := pbxsim.DefaultAMIUser, pbxsim.DefaultAMISecret
	for _, tc := range []struct {
		name string
		cfg  ami.Config
		want ami.ProbeFailure // 0: logs in
	}{
		{"good secret", ami.Config{Addr: sim.AMIAddr(), Username: user, Secret: secret}, 0},
		{"good secret md5", ami.Config{Addr: sim.AMIAddr(), Username: user, Secret: secret, MD5: true}, 0},
		{"wrong secret", ami.Config{Addr: sim.AMIAddr(), Username: user, Secret: "nope"}, ami.ProbeAuthFailed},
		{"wrong secret md5", ami.Config{Addr: sim.AMIAddr(), Username: user, Secret: "nope", MD5: true}, ami.ProbeAuthFailed},
		{"unknown user", ami.Config{Addr: sim.AMIAddr(), Username: "who", Secret: secret}, ami.ProbeAuthFailed},
		{"nothing listens", ami.Config{Addr: dead.Addr().String(), Username: user, Secret: secret}, ami.ProbeRefused},
		{"not AMI", ami.Config{Addr: http.Addr().String(), Username: user, Secret: secret}, ami.ProbeNotAMI},
		{"silent", ami.Config{Addr: silent.Addr().String(), Username: user, Secret: secret}, ami.ProbeTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			started := time.Now()
			err := ami.Probe(ctx, tc.cfg)
			var pe *ami.ProbeError
			switch {
			case tc.want == 0 && err != nil:
				t.Fatalf("Probe: %v, want nil", err)
			case tc.want == 0:
			case !errors.As(err, &pe):
				t.Fatalf("Probe: %v (%T), want a *ProbeError", err, err)
			case pe.Failure != tc.want:
				t.Fatalf("Probe: %v, want %v", err, tc.want)
			}
			if d := time.Since(started); d > 1500*time.Millisecond {
				t.Errorf("Probe took %v past its 1 s deadline", d)
			}
			t.Logf("%v in %v", err, time.Since(started).Round(time.Millisecond))
		})
	}
	time.Sleep(300 * time.Millisecond)
	if sentLogin.Load() {
		t.Error("a peer with no manager banner was sent Login")
	}
}

// listen starts a TCP listener serving each connection with serve (nil:
// none accepted).
func listen(t *testing.T, serve func(net.Conn)) net.Listener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	if serve != nil {
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() { defer c.Close(); serve(c) }()
			}
		}()
	}
	return ln
}

// TestClientNoLoginToNonManager: the Client, as the probe, sends no
// credentials to a peer whose first line is not a manager's banner; its
// connection attempt fails instead.
func TestClientNoLoginToNonManager(t *testing.T) {
	var sentLogin atomic.Bool
	peer := listen(t, func(c net.Conn) {
		c.Write([]byte("SSH-2.0-OpenSSH_9.2\r\n"))
		c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		b, _ := io.ReadAll(c)
		sentLogin.Store(sentLogin.Load() || strings.Contains(string(b), "Login"))
	})
	c := startClient(t, ami.Config{Addr: peer.Addr().String(), Username: "u", Secret: "s"})
	deadline := time.Now().Add(10 * time.Second)
	for c.Stats().Failures < 1 {
		if time.Now().After(deadline) {
			t.Fatal("no failed connection attempt")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // the peer's read
	if sentLogin.Load() || c.Connected() {
		t.Errorf("a peer with no manager banner: sent Login %v, connected %v", sentLogin.Load(), c.Connected())
	}
}
