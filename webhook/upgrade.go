package webhook

import (
	"encoding/json"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"

	"github.com/ctibridge/ctibridge/wal"
)

// drainOld moves the events that a queue of an earlier layout holds for
// this webhook (dir/<name>: before, on the bus, each named PBX had a
// service of its own, its queues in <data-dir>/webhooks-<pbx>) to the end
// of h's queue, in order, then removes it, and dir once it is empty. New
// calls it, before the sender runs. What does not fit under h's bound
// stays there, for the next start; an event moved and not yet marked
// moved when the process dies is moved again (a repeat, as any resend).
func (h *hook) drainOld(dir string) error {
	path := filepath.Join(dir, h.cfg.Name)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	old, err := wal.Open[record](path, wal.Options{Prefix: "events", Max: math.MaxInt64 / 2})
	if err != nil {
		return err
	}
	_, n := old.Stats()
	var buf []byte
	bad, err := old.Drain(256, func(rs []record) error {
		buf = buf[:0]
		for _, r := range rs {
			line, err := json.Marshal(r)
			if err != nil {
				return err
			}
			buf = append(append(buf, line...), '\n')
		}
		if int64(len(buf)) > h.q.Free() {
			return wal.ErrFull
		}
		return h.q.Append(buf, len(rs), nil)
	})
	old.Close()
	if bad > 0 {
		h.dropped.Add(uint64(bad))
		h.log.Error("unreadable lines of a queue of an earlier version skipped", "dir", path, "count", bad)
	}
	if err != nil {
		return err
	}
	h.log.Info("webhook queue of an earlier version moved", "dir", path, "events", n)
	if err := os.RemoveAll(path); err != nil {
		return err
	}
	os.Remove(dir) // the last webhook's: empty now (else kept)
	return nil
}
