package loadtest

import (
	"bufio"
	"os"
	"strings"
	"time"
)

// phases fills in where a takeover's time went, from the new leader's and
// the edges' logs (their slog lines, stamped to the millisecond: the
// messages bus and link log at info level).
func (r *failRun) phases(k *FailoverKill, t0 time.Time) {
	since := func(t time.Time) time.Duration {
		if t.IsZero() {
			return -1
		}
		return t.Sub(t0)
	}
	if b := r.bridge(k.Leader); b != nil {
		k.Won = since(logTime(b.proc.logPath, t0, "lease won: catching up before leading"))
		k.Leading = since(logTime(b.proc.logPath, t0, "leading: starting the PBX link"))
		k.Resynced = since(logTime(b.proc.logPath, t0, "pbx state resynchronised"))
	}
	for _, e := range r.edges {
		k.EdgeLed = append(k.EdgeLed, since(logTime(e.proc.logPath, t0, "pbx led by", "node="+k.Leader)))
	}
}

// logTime is the time of the first line of the log at path stamped after
// t whose message is msg and that holds every one of with; zero when none.
func logTime(path string, t time.Time, msg string, with ...string) time.Time {
	f, err := os.Open(path)
	if err != nil {
		return time.Time{}
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	want := `msg="` + msg + `"`
	for sc.Scan() {
		line := sc.Text()
		stamp, ok := strings.CutPrefix(line, "time=")
		if !ok || !strings.Contains(line, want) {
			continue
		}
		stamp, _, _ = strings.Cut(stamp, " ")
		at, err := time.Parse(time.RFC3339Nano, stamp)
		if err != nil || !at.After(t) {
			continue
		}
		all := true
		for _, w := range with {
			all = all && strings.Contains(line, w)
		}
		if all {
			return at
		}
	}
	return time.Time{}
}
