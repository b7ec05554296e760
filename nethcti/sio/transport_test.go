package sio

import (
	"strings"
	"testing"
	"time"
)

// TestDirectWritesKeepOrder: an event goes straight to the transport's
// write queue only when the engine socket has nothing waiting; while a
// write is in flight (the transport not writable) a packet the socket
// took first (the marker) is written first, the event behind it.
func TestDirectWritesKeepOrder(t *testing.T) {
	e := newEnv(t, Config{})
	conn := e.dialSio(t)
	defer conn.Close()
	var c *client
	for deadline := time.Now().Add(5 * time.Second); c == nil || c.view.Load() == nil; time.Sleep(10 * time.Millisecond) {
		if l := e.srv.list.Load(); l != nil && len(*l) == 1 {
			c = (*l)[0]
		}
		if time.Now().After(deadline) {
			t.Fatal("the client is not logged in on the server")
		}
	}
	tr := c.sock.Conn().Transport().(*wsTransport)

	read := func() string {
		t.Helper()
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		for {
			_, m, err := conn.ReadMessage()
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			if s := string(m); s != "2" {
				return s
			}
		}
	}

	// Writable: the event is written at once.
	e.apply(devState("299", true))
	if m := read(); !strings.HasPrefix(m, `42["extenUpdate"`) {
		t.Fatalf("got %.60s, want the extenUpdate", m)
	}

	// A write in flight: the marker waits in the socket's buffer, and so
	// must the event that follows it.
	tr.SetWritable(false)
	c.sock.Emit("marker")
	e.apply(devState("299", false))
	time.Sleep(200 * time.Millisecond) // the event reaches the socket
	tr.release()
	if m := read(); !strings.HasPrefix(m, `42["marker"`) {
		t.Fatalf("got %.60s first, want the marker the socket took before the event", m)
	}
	if m := read(); !strings.HasPrefix(m, `42["extenUpdate"`) {
		t.Fatalf("got %.60s, want the extenUpdate", m)
	}
}
