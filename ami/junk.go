package ami

import (
	"log/slog"
	"strconv"
	"sync"
	"time"
)

// Junk is a kind of malformed input a Reader or a Client met.
type Junk uint8

const (
	JunkGarbage    Junk = iota // a line that is not "Key: value"
	JunkControl                // a line holding NUL or a stray CR
	JunkLongLine               // a line over ReaderConfig.MaxLine: a protocol error
	JunkLongFrame              // a frame over ReaderConfig.MaxMessage: a protocol error
	JunkHeaderless             // a frame with neither Event nor Response (Client only)
	numJunk
)

func (j Junk) String() string {
	switch j {
	case JunkGarbage:
		return "garbage_line"
	case JunkControl:
		return "control_byte"
	case JunkLongLine:
		return "line_too_long"
	case JunkLongFrame:
		return "frame_too_large"
	case JunkHeaderless:
		return "headerless_frame"
	}
	return "unknown"
}

// DefaultJunkLogEvery is how often a Client logs the count of malformed
// input of one kind after logging its first occurrence.
const DefaultJunkLogEvery = time.Minute

// junkLog logs malformed input without letting a peer flood the log: the
// first occurrence of each kind is logged at once with a sample of the
// bytes, later ones are counted and logged as one line per kind at most
// every period (flush, called from the keep-alive and at the end of a
// connection, reports counts even when the junk has stopped). Safe for
// concurrent use.
type junkLog struct {
	log   *slog.Logger
	every time.Duration
	now   func() time.Time

	mu     sync.Mutex
	seen   [numJunk]bool
	unsaid [numJunk]uint64    // occurrences not logged yet
	last   [numJunk]time.Time // when a line for the kind was last logged
}

func newJunkLog(log *slog.Logger, every time.Duration, now func() time.Time) *junkLog {
	if every <= 0 {
		every = DefaultJunkLogEvery
	}
	if now == nil {
		now = time.Now
	}
	return &junkLog{log: log, every: every, now: now}
}

// note records one occurrence; sample is copied only when it is logged.
func (l *junkLog) note(j Junk, sample []byte) {
	if j >= numJunk {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if !l.seen[j] {
		l.seen[j] = true
		l.last[j] = now
		l.log.Warn("ami malformed input", "kind", j.String(), "sample", quoteSample(sample))
		return
	}
	l.unsaid[j]++
	l.report(j, now)
}

// flush logs the kinds whose period is over.
func (l *junkLog) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	for j := range numJunk {
		l.report(j, now)
	}
}

func (l *junkLog) report(j Junk, now time.Time) {
	if l.unsaid[j] == 0 || now.Sub(l.last[j]) < l.every {
		return
	}
	l.log.Warn("ami malformed input repeated", "kind", j.String(), "count", l.unsaid[j], "since", l.last[j].UTC().Format(time.RFC3339))
	l.unsaid[j] = 0
	l.last[j] = now
}

// quoteSample returns at most 80 bytes of b, quoted so that control bytes
// are visible and cannot forge log lines.
func quoteSample(b []byte) string {
	const n = 80
	if len(b) > n {
		return strconv.Quote(string(b[:n])) + "..."
	}
	return strconv.Quote(string(b))
}
