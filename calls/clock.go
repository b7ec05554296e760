package calls

import (
	"strconv"
	"strings"
	"time"

	"github.com/ctibridge/ctibridge/ami"
)

// StreamClock is a deterministic clock for replays: it tells the time the
// recorded messages carry, never the machine's. Give its Now to
// Config.Now and Observe every message before applying it. It never goes
// backwards. Not safe for concurrent use (the replay loop owns it).
type StreamClock struct {
	t time.Time
}

// Observe advances the clock from m: its Timestamp header (Asterisk's
// timestampevents, "1796028439.973612") when present, else the epoch part
// of a Uniqueid or Linkedid ("1796028439.0": one-second resolution), else
// an EventTV ("2026-11-30T08:47:19.310+0000").
func (c *StreamClock) Observe(m ami.Message) {
	var t time.Time
	if v := m.Get("Timestamp"); v != "" {
		t = parseEpoch(v, true)
	}
	if t.IsZero() {
		for _, k := range [...]string{"Uniqueid", "Linkedid"} {
			if v := m.Get(k); v != "" {
				if t = parseEpoch(v, false); !t.IsZero() {
					break
				}
			}
		}
	}
	if t.IsZero() {
		if v := m.Get("EventTV"); v != "" {
			for _, layout := range [...]string{"2006-01-02T15:04:05.000-0700", "2006-01-02T15:04:05-0700", time.RFC3339Nano} {
				if p, err := time.Parse(layout, v); err == nil {
					t = p
					break
				}
			}
		}
	}
	if t.After(c.t) {
		c.t = t
	}
}

// parseEpoch reads "SECONDS[.FRACTION]"; the fraction is a time fraction
// only when frac is set (in a Uniqueid it is a counter).
func parseEpoch(v string, frac bool) time.Time {
	sec, rest, _ := strings.Cut(v, ".")
	s, err := strconv.ParseInt(sec, 10, 64)
	if err != nil || s <= 0 {
		return time.Time{}
	}
	var ns int64
	if frac && rest != "" {
		if len(rest) > 9 {
			rest = rest[:9]
		}
		n, err := strconv.ParseInt(rest, 10, 64)
		if err == nil {
			for i := len(rest); i < 9; i++ {
				n *= 10
			}
			ns = n
		}
	}
	return time.Unix(s, ns)
}

// Now is the latest time observed (the zero time before any).
func (c *StreamClock) Now() time.Time { return c.t }
