package wsbench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
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

// runFlooder is the child process of one flooding client: it floods until
// it is closed or interrupted, then prints how it ended as one JSON line.
// A process of its own, so its sending does not take CPU from the
// measuring clients in the parent.
func runFlooder(url, token, op string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	r := flood(url, token, op, ctx.Done())
	return json.NewEncoder(os.Stdout).Encode(map[string]any{"sent": r.sent, "ended": r.ended, "how": r.how})
}

// flooders are the running flooding processes.
type flooders []*exec.Cmd

func startFlooders(self []string, n int, url, token, op string) (flooders, error) {
	var fs flooders
	for range n {
		args := append(self[1:len(self):len(self)], "-flood-url", url, "-flood-token", token, "-flood-op", op)
		cmd := exec.Command(self[0], args...)
		cmd.Stderr = os.Stderr
		cmd.Stdout = new(bytes.Buffer)
		if err := cmd.Start(); err != nil {
			fs.stop()
			return nil, err
		}
		fs = append(fs, cmd)
	}
	return fs, nil
}

// stop interrupts the flooders that still run and returns how each ended.
func (fs flooders) stop() []floodResult {
	var rs []floodResult
	for _, cmd := range fs {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
		var out struct {
			Sent  int
			Ended time.Duration
			How   string
		}
		if err := json.Unmarshal(cmd.Stdout.(*bytes.Buffer).Bytes(), &out); err != nil {
			out.How = "flooder: " + err.Error()
		}
		rs = append(rs, floodResult{sent: out.Sent, ended: out.Ended, how: out.How})
	}
	return rs
}
