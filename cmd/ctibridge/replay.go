package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/calls"
)

// replayBatch is how many messages are applied between two publications,
// like one busy socket read; it keeps the engine's pending changes bounded.
const replayBatch = 256

// replay runs a recorded AMI byte stream through the engine and prints the
// state as JSON, the same bytes REST serves. Memory stays constant whatever
// the file size: messages are read one at a time and not retained.
func replay(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	at := fs.Int64("at", 0, "stop after N messages (frames after the banner, 1-based like the lines of a .timing file); 0 means the whole file")
	stats := fs.Bool("stats", false, "print reader and engine counters to stderr")
	// Accept the file before or after the flags.
	var file string
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		file, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if file == "" && fs.NArg() == 1 {
		file = fs.Arg(0)
	} else if fs.NArg() > 0 || file == "" {
		return errors.New("replay: want exactly one FILE.ami")
	}
	f, err := os.Open(file)
	if err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	defer f.Close()

	br := bufio.NewReaderSize(f, 1<<20)
	r := ami.NewReader(br, ami.ReaderConfig{})
	// A recording starts with the banner; tolerate one that does not.
	if first, _ := br.Peek(256); !bytes.Contains(firstLine(first), []byte(":")) {
		if _, err := r.ReadBanner(); err != nil {
			return fmt.Errorf("replay: %s: %w", file, err)
		}
	}
	var clock calls.StreamClock
	eng := calls.New(calls.Config{Now: clock.Now})
	var n int64
	live := false
	for *at == 0 || n < *at {
		m, err := r.ReadMessage()
		if err == io.EOF {
			break
		}
		if err != nil {
			// A recording cut mid-frame (a crash, a rotation) still
			// replays up to the cut.
			fmt.Fprintf(stderr, "replay: %s: stopped after message %d: %v\n", file, n, err)
			break
		}
		n++
		clock.Observe(m)
		if !live && !clock.Now().IsZero() {
			// The recording is the link: live from the first time it
			// carries (the login response carries none).
			eng.SetLink(calls.LinkLive)
			live = true
		}
		eng.Apply(m)
		if n%replayBatch == 0 {
			eng.Publish()
		}
	}
	if !live {
		eng.SetLink(calls.LinkLive)
	}
	snap := eng.Publish()
	if *at > 0 && n < *at {
		fmt.Fprintf(stderr, "replay: %s has only %d messages\n", file, n)
	}
	if *stats {
		st := eng.Stats()
		rs := r.Stats()
		fmt.Fprintf(stderr, "messages=%d bytes=%d garbage=%d oversized=%d events=%d unknown=%d\n",
			rs.Messages, rs.Bytes, rs.Garbage, rs.Oversized, st.Events, st.Unknown)
	}
	out := bufio.NewWriter(stdout)
	out.Write(snap.StateJSON())
	out.WriteString("\n")
	return out.Flush()
}

func firstLine(b []byte) []byte {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return b[:i]
	}
	return b
}
