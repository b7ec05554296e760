package ws

import (
	"context"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
)

// TestRevocationClosesSocket: logging the token out (or revoking the
// session, or its user) closes the open WebSocket with 4003 within a
// second; another session of the same user stays open.
func TestRevocationClosesSocket(t *testing.T) {
	e := newEnv(t, calls.Config{}, auth.Config{}, Config{})
	for _, how := range []string{"logout", "user"} {
		t.Run(how, func(t *testing.T) {
			tok := e.token("alice")
			other := e.token("bob")
			c, err := Dial(context.Background(), e.url, tok)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ob, err := Dial(context.Background(), e.url, other)
			if err != nil {
				t.Fatal(err)
			}
			defer ob.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			for _, cl := range []*Client{c, ob} {
				if m, err := cl.Next(ctx); err != nil || m.Op != "hello" {
					t.Fatalf("hello: %+v, %v", m, err)
				}
			}
			start := time.Now()
			switch how {
			case "logout":
				e.auth.Logout(tok)
			case "user":
				e.auth.RevokeUser("alice")
			}
			for {
				_, err := c.Next(ctx)
				if err == nil {
					continue
				}
				if CloseCode(err) != CloseTokenExpired {
					t.Fatalf("closed with %v, want 4003", err)
				}
				break
			}
			d := time.Since(start)
			if d > time.Second {
				t.Errorf("closed %v after the revocation, want within 1 s", d)
			}
			t.Logf("closed with 4003 %v after the revocation", d)
			if err := ob.Ping(); err != nil {
				t.Fatalf("bob's ping: %v", err)
			}
			if m, err := ob.Next(ctx); err != nil || m.Op != "pong" {
				t.Errorf("bob's socket after alice's revocation: %+v, %v", m, err)
			}
		})
	}
}
