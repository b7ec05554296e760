package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ctibridge/ctibridge/ws"
)

// floodResult is how one flooding client ended.
type floodResult struct {
	sent  int
	ended time.Duration // since the flood started; 0 if it was still going
	how   string
}

// floodMessage is what a flooder sends in a loop.
func floodMessage(op, epoch string) ([]byte, error) {
	switch op {
	case "subscribe":
		return []byte(`{"op":"subscribe","topics":["extensions"]}`), nil
	case "resume":
		return []byte(`{"op":"subscribe","topics":["extensions"],"since":1,"epoch":"` + epoch + `"}`), nil
	case "ping":
		return []byte(`{"op":"ping"}`), nil
	case "garbage":
		return []byte(`{"op":"subscribe","topics":["extensions"],"x":"` + strings.Repeat("x", 3000) + `"}`), nil
	}
	return nil, fmt.Errorf("unknown -flood-op %q (subscribe, resume, ping, garbage)", op)
}

// flood connects one client that sends op as fast as it can and reads
// nothing, until the server closes it or stop is closed.
func flood(url, token, op string, stop <-chan struct{}) floodResult {
	c, err := ws.Dial(context.Background(), url, token)
	if err != nil {
		return floodResult{how: err.Error()}
	}
	defer c.Close()
	hello, err := c.Next(context.Background())
	if err != nil {
		return floodResult{how: err.Error()}
	}
	msg, err := floodMessage(op, hello.Epoch)
	if err != nil {
		return floodResult{how: err.Error()}
	}
	start := time.Now()
	var r floodResult
	for {
		select {
		case <-stop:
			r.how = "still flooding at the end (stopped by wsbench)"
			return r
		default:
		}
		if err := c.WriteRaw(msg); err != nil {
			r.ended = time.Since(start)
			// The server closed: its close frame is in what it sent.
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			for {
				if _, err := c.ReadRaw(); err != nil {
					r.how = fmt.Sprintf("closed with %d (%v)", ws.CloseCode(err), err)
					return r
				}
			}
		}
		r.sent++
	}
}
