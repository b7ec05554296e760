package ws

import (
	"testing"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
)

// bareHub is a hub whose Run is not running: tests call its fan-out and
// snapshot code directly, from the test goroutine.
func bareHub(t testing.TB, eng *calls.Engine, users *auth.Users) *Hub {
	t.Helper()
	h, err := NewHub(eng, auth.NewService(users, auth.Config{}), Config{MaxPending: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	h.last = eng.Feed().LastSeq()
	return h
}

const allTopics = topicExtensions | topicQueues | topicParkings | topicTrunks | topicMe

// addFake adds a subscribed connection without a socket.
func (h *Hub) addFake(u *auth.User, topics uint8) *conn {
	c := &conn{h: h, user: u, full: auth.ViewOf(u).Full(), seesUnowned: auth.Allowed(u, auth.SeeCalls, ""),
		topics: topics, subscribed: true, slot: len(h.clients), ended: true} // ended: no flusher starts
	h.clients = append(h.clients, c)
	return c
}

// take empties c's queue as the writer does and returns what was there.
func (c *conn) take() []*frame {
	c.mu.Lock()
	defer c.mu.Unlock()
	q := c.takeQueue()
	var out []*frame
	for _, f := range q {
		if f != nil {
			out = append(out, f)
		}
	}
	clear(q)
	c.spare = q[:0]
	return out
}

// payload is a frame's payload, header stripped.
func payload(f *frame) []byte {
	b := append([]byte(nil), f.b...)
	for _, p := range f.more {
		b = append(b, p...)
	}
	return b[headerLenOf(b):]
}

// headerLenOf reads the header length of a server frame.
func headerLenOf(b []byte) int {
	switch b[1] & 0x7F {
	case 126:
		return 4
	case 127:
		return 10
	}
	return 2
}
