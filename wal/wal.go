package wal

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ErrFull: the log reached its bound; the records were not appended.
var ErrFull = errors.New("wal: full")

// Log is a bounded write-ahead log of records of type T, stored as JSON
// lines. Records are appended and fsynced before they count as taken,
// then drained, in order, to whatever consumes them (a database, a
// webhook receiver). It is a directory of segments,
// <prefix>-<n>.spool (JSON lines, one record each, n increasing), and
// <prefix>.pos, which says how far the consumer has them ("<n>
// <offset>", rewritten in place).
//
// The writer appends to the newest segment only; it starts a new one at
// every open (so a line a crash tore is never continued) and past
// SegMax. The drainer reads from the position to what has been synced,
// and deletes each segment it has finished. A crash between a write to
// the consumer and the position update re-sends records; a position lost
// entirely (power cut) replays the segments left. Consumers must
// therefore tolerate duplicates (an idempotent key).
//
// One goroutine appends, one drains; Stats and Free are safe from any.
type Log[T any] struct {
	// Immutable after Open.
	dir    string
	prefix string
	max    int64 // bound on pending bytes
	segMax int64 // a segment is closed past this size
	pos    *os.File

	mu       sync.Mutex // guards below
	w        *os.File   // newest segment, opened for append
	wseg     uint64     // its number
	wsize    int64      // its synced size
	broken   bool       // a write failed: start a new segment
	rseg     uint64     // segment the drainer is in
	roff     int64      // bytes of rseg already consumed
	pending  int64      // bytes not yet consumed
	pendingN int64      // records not yet consumed

	syncs, syncNanos atomic.Int64 // fsyncs done and their total time

	hot  []hotGroup[T] // groups synced, in order, still in memory
	hotN int           // records in hot

	// Owned by the drainer, reused from drain to drain.
	br    *bufio.Reader
	items []T
}

// Options configures a Log. Prefix and Max are required.
type Options struct {
	// Prefix names the files: <prefix>-<n>.spool and <prefix>.pos.
	Prefix string
	// Max bounds the bytes appended and not yet consumed.
	Max int64
	// SegMax is the size past which a segment is closed. Default
	// DefaultSegMax.
	SegMax int64
}

// DefaultSegMax is Options.SegMax's default: 4 MiB.
const DefaultSegMax = 4 << 20

// SegName is the file name of segment n.
func SegName(prefix string, n uint64) string { return fmt.Sprintf("%s-%016d.spool", prefix, n) }

// Open opens the log in dir, resuming what a previous process left.
func Open[T any](dir string, o Options) (_ *Log[T], err error) {
	defer func() {
		if err != nil {
			err = fmt.Errorf("wal: %w", err)
		}
	}()
	if o.Prefix == "" || o.Max <= 0 {
		return nil, errors.New("no prefix or no bound")
	}
	if o.SegMax <= 0 {
		o.SegMax = DefaultSegMax
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, err
	}
	segs, err := Segments(dir, o.Prefix)
	if err != nil {
		return nil, err
	}
	pos, err := os.OpenFile(filepath.Join(dir, o.Prefix+".pos"), os.O_CREATE|os.O_RDWR, 0o640)
	if err != nil {
		return nil, err
	}
	s := &Log[T]{dir: dir, prefix: o.Prefix, max: o.Max, segMax: o.SegMax, pos: pos}
	s.rseg, s.roff = readPos(pos)
	// Segments before the position are done (their removal was cut
	// short); a position in a missing segment starts at the next one.
	for len(segs) > 0 && segs[0] < s.rseg {
		os.Remove(filepath.Join(dir, SegName(o.Prefix, segs[0])))
		segs = segs[1:]
	}
	if len(segs) == 0 || segs[0] != s.rseg {
		s.roff = 0
		if len(segs) > 0 {
			s.rseg = segs[0]
		}
	}
	for _, n := range segs {
		b, err := os.ReadFile(filepath.Join(dir, SegName(o.Prefix, n)))
		if err != nil {
			pos.Close()
			return nil, err
		}
		if n == s.rseg {
			if s.roff > int64(len(b)) {
				s.roff = 0 // ahead of the data (power cut): replay
			}
			b = b[s.roff:]
		}
		s.pending += int64(len(b))
		s.pendingN += int64(bytes.Count(b, []byte{'\n'}))
	}
	s.wseg = s.rseg
	if len(segs) > 0 {
		s.wseg = segs[len(segs)-1] + 1
	}
	if err := s.newSegment(); err != nil {
		pos.Close()
		return nil, err
	}
	if len(segs) == 0 {
		s.rseg, s.roff = s.wseg, 0
	}
	return s, nil
}

// Segments lists the numbers of the segments of prefix in dir, in order.
func Segments(dir, prefix string) ([]uint64, error) {
	names, err := filepath.Glob(filepath.Join(dir, prefix+"-*.spool"))
	if err != nil {
		return nil, err
	}
	var out []uint64
	for _, p := range names {
		s := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(p), prefix+"-"), ".spool")
		if n, err := strconv.ParseUint(s, 10, 64); err == nil {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}

// PosRecord is the fixed-width content of a position file: one write
// replaces it whole.
func PosRecord(seg uint64, off int64) []byte {
	return fmt.Appendf(nil, "%020d %020d\n", seg, off)
}

func readPos(f *os.File) (uint64, int64) {
	b := make([]byte, 64)
	n, _ := f.ReadAt(b, 0)
	seg, off, _ := strings.Cut(strings.TrimSpace(string(b[:n])), " ")
	sn, err1 := strconv.ParseUint(seg, 10, 64)
	on, err2 := strconv.ParseInt(off, 10, 64)
	if err1 != nil || err2 != nil || on < 0 {
		return 0, 0
	}
	return sn, on
}

// newSegment closes the segment being written and creates the next one
// (s.wseg), syncing the directory so that the new name survives a power
// cut. Called with s.mu held, or before the log is shared.
func (s *Log[T]) newSegment() error {
	if s.w != nil {
		s.w.Close()
		s.wseg++
	}
	f, err := os.OpenFile(filepath.Join(s.dir, SegName(s.prefix, s.wseg)), os.O_CREATE|os.O_WRONLY|os.O_APPEND|os.O_EXCL, 0o640)
	if err != nil {
		s.w = nil
		return err
	}
	s.w, s.wsize, s.broken = f, 0, false
	if d, err := os.Open(s.dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// Stats returns the bytes and records not yet consumed.
func (s *Log[T]) Stats() (bytes, items int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pending, s.pendingN
}

// Append writes n records (buf, JSON lines) at the end and syncs them to
// disk: all or, when the bound would be passed, none (ErrFull). hot
// (optional) holds the same records in groups, with their bytes in buf,
// for the drainer to take from memory. Only one goroutine (the writer)
// calls it.
func (s *Log[T]) Append(buf []byte, n int, hot []Group[T]) error {
	s.mu.Lock()
	if s.pending+int64(len(buf)) > s.max {
		s.mu.Unlock()
		return ErrFull
	}
	if s.w == nil || s.broken || s.wsize >= s.segMax {
		if err := s.newSegment(); err != nil {
			s.mu.Unlock()
			return fmt.Errorf("wal: %w", err)
		}
	}
	f, base := s.w, s.wsize
	s.mu.Unlock()

	// Outside the lock: the drainer goes on meanwhile. It reads only up
	// to wsize, what is synced.
	m, err := f.Write(buf)
	if err == nil {
		start := time.Now()
		err = f.Sync()
		s.syncs.Add(1)
		s.syncNanos.Add(int64(time.Since(start)))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wsize += int64(m)
	s.pending += int64(m)
	if m == len(buf) {
		s.pendingN += int64(n)
	}
	if err != nil {
		// Maybe a torn line at the end: never write after it. The
		// drainer skips a line without its newline.
		s.broken = true
		return fmt.Errorf("wal: %w", err)
	}
	s.keepHot(base, hot)
	return nil
}

// Free is the room left under the bound, in bytes.
func (s *Log[T]) Free() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.max - s.pending
}

// Drain hands the synced records to write in order, up to batch at a
// time, moving the position after each call; it stops at the first
// error of write, keeping the rest, and returns nil once it has caught
// up. A group of records kept in memory is handed whole, whatever batch.
// bad counts lines that could not be read back (lost). Only one
// goroutine (the drainer) calls it.
func (s *Log[T]) Drain(batch int, write func([]T) error) (bad int, err error) {
	for {
		if g, ok := s.takeHot(); ok {
			// On an error g is forgotten: the file still has it.
			if err := write(g.items); err != nil {
				return bad, err
			}
			if err := s.setPos(g.seg, g.end, g.end-g.start, len(g.items)); err != nil {
				return bad, err
			}
			continue
		}
		s.mu.Lock()
		seg, off, wseg, end := s.rseg, s.roff, s.wseg, s.wsize
		s.mu.Unlock()
		closed := seg < wseg
		if !closed && off >= end {
			return bad, nil
		}
		n, b, err := s.drainSegment(seg, off, end, closed, batch, write)
		bad += b
		if err != nil {
			return bad, err
		}
		if n == 0 && !closed {
			return bad, nil
		}
	}
}

// drainSegment drains segment seg from off: to end when it is the one
// being written, to its end of file when it is closed (then deletes
// it). It returns the records written.
func (s *Log[T]) drainSegment(seg uint64, off, end int64, closed bool, batch int, write func([]T) error) (written, bad int, err error) {
	path := filepath.Join(s.dir, SegName(s.prefix, seg))
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, fmt.Errorf("wal: %w", err)
	}
	defer f.Close()
	var src io.Reader = io.NewSectionReader(f, off, 1<<62)
	if !closed {
		src = io.NewSectionReader(f, off, end-off)
	}
	if s.br == nil {
		s.br = bufio.NewReaderSize(src, 64<<10)
	}
	br := s.br
	br.Reset(src)
	defer br.Reset(nil) // let the file go
	if cap(s.items) < batch {
		s.items = make([]T, 0, batch)
	}
	items := s.items
	defer clear(items[:cap(items)]) // let the strings go
	for {
		items = items[:0]
		var n int64
		lines, eof := 0, false
		for len(items) < batch {
			line, err := br.ReadSlice('\n')
			if err == bufio.ErrBufferFull {
				// A line longer than the buffer: no record is; skip it.
				n += int64(len(line))
				for err == bufio.ErrBufferFull {
					line, err = br.ReadSlice('\n')
					n += int64(len(line))
				}
				bad++
				lines++
				continue
			}
			if err != nil {
				// End of what is synced, or a torn last line in a
				// closed segment (a crash mid-write): skip it.
				n += int64(len(line))
				eof = true
				break
			}
			n += int64(len(line))
			lines++
			var c T
			if json.Unmarshal(line, &c) != nil {
				bad++
				continue
			}
			items = append(items, c)
		}
		if len(items) > 0 {
			if err := write(items); err != nil {
				return written, bad, err
			}
			written += len(items)
		}
		if eof && closed {
			// Done with this segment: move on, then delete it.
			if err := s.setPos(seg+1, 0, n, lines); err != nil {
				return written, bad, err
			}
			os.Remove(path)
			return written, bad, nil
		}
		if n > 0 {
			off += n
			if err := s.setPos(seg, off, n, lines); err != nil {
				return written, bad, err
			}
		}
		if eof {
			return written, bad, nil
		}
	}
}

// setPos records that the consumer has what precedes (seg, off): n more
// bytes holding lines records.
func (s *Log[T]) setPos(seg uint64, off, n int64, lines int) error {
	if _, err := s.pos.WriteAt(PosRecord(seg, off), 0); err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rseg, s.roff = seg, off
	s.pending -= n
	s.pendingN -= int64(lines)
	return nil
}

// Close closes the files. The drainer and the writer must have stopped.
func (s *Log[T]) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pos.Close()
	if s.w == nil {
		return nil
	}
	return s.w.Close()
}

// Syncs returns the fsyncs Append did and the time they took in all.
func (s *Log[T]) Syncs() (n int64, total time.Duration) {
	return s.syncs.Load(), time.Duration(s.syncNanos.Load())
}
