package history

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

// ErrSpoolFull: the spool reached its bound; the CDRs were dropped.
var ErrSpoolFull = errors.New("history: spool full")

// spool is the Recorder's write-ahead log. Every CDR is appended to it
// and fsynced before it counts as taken, then written to the store from
// it, in order. It is a directory of segments, cdr-<n>.spool (JSON lines,
// one CDR each, n increasing), and cdr.pos, which says how far the store
// has them ("<n> <offset>", rewritten in place).
//
// The writer appends to the newest segment only; it starts a new one at
// every open (so a line a crash tore is never continued) and past
// segMax. The drainer reads from the position to what has been synced,
// and deletes each segment it has finished. A crash between a store
// write and the position update re-sends rows, which the store's
// (uniqueid, sequence) key ignores; a position lost entirely (power cut)
// replays the segments left, with the same effect.
type spool struct {
	// Immutable after openSpool.
	dir    string
	max    int64 // bound on pending bytes
	segMax int64 // a segment is closed past this size
	pos    *os.File

	mu       sync.Mutex // guards below
	w        *os.File   // newest segment, opened for append
	wseg     uint64     // its number
	wsize    int64      // its synced size
	broken   bool       // a write failed: start a new segment
	rseg     uint64     // segment the drainer is in
	roff     int64      // bytes of rseg already in the store
	pending  int64      // bytes not yet in the store
	pendingN int64      // CDRs not yet in the store

	syncs, syncNanos atomic.Int64 // fsyncs done and their total time

	hot  []hotGroup // groups synced, in order, still in memory
	hotN int        // CDRs in hot

	// Owned by the drainer, reused from drain to drain.
	br   *bufio.Reader
	cdrs []CDR
}

const defaultSegMax = 4 << 20

func segName(n uint64) string { return fmt.Sprintf("cdr-%016d.spool", n) }

// openSpool opens the spool in dir, resuming what a previous process
// left (including a spool of the single-file format, cdr.spool).
func openSpool(dir string, max, segMax int64) (_ *spool, err error) {
	defer func() {
		if err != nil {
			err = fmt.Errorf("history: spool: %w", err)
		}
	}()
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, err
	}
	if err := upgradeSpool(dir); err != nil {
		return nil, err
	}
	segs, err := segments(dir)
	if err != nil {
		return nil, err
	}
	pos, err := os.OpenFile(filepath.Join(dir, "cdr.pos"), os.O_CREATE|os.O_RDWR, 0o640)
	if err != nil {
		return nil, err
	}
	s := &spool{dir: dir, max: max, segMax: segMax, pos: pos}
	s.rseg, s.roff = readPos(pos)
	// Segments before the position are done (their removal was cut
	// short); a position in a missing segment starts at the next one.
	for len(segs) > 0 && segs[0] < s.rseg {
		os.Remove(filepath.Join(dir, segName(segs[0])))
		segs = segs[1:]
	}
	if len(segs) == 0 || segs[0] != s.rseg {
		s.roff = 0
		if len(segs) > 0 {
			s.rseg = segs[0]
		}
	}
	for _, n := range segs {
		b, err := os.ReadFile(filepath.Join(dir, segName(n)))
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

// upgradeSpool turns a single-file spool (cdr.spool and its position in
// cdr.spool.pos) into segment 0.
func upgradeSpool(dir string) error {
	old := filepath.Join(dir, "cdr.spool")
	if _, err := os.Stat(old); err != nil {
		return nil
	}
	var off int64
	if b, err := os.ReadFile(old + ".pos"); err == nil {
		off, _ = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	}
	if err := os.WriteFile(filepath.Join(dir, "cdr.pos"), posRecord(0, off), 0o640); err != nil {
		return err
	}
	if err := os.Rename(old, filepath.Join(dir, segName(0))); err != nil {
		return err
	}
	os.Remove(old + ".pos")
	return nil
}

// segments lists the segment numbers in dir, in order.
func segments(dir string) ([]uint64, error) {
	names, err := filepath.Glob(filepath.Join(dir, "cdr-*.spool"))
	if err != nil {
		return nil, err
	}
	var out []uint64
	for _, p := range names {
		s := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(p), "cdr-"), ".spool")
		if n, err := strconv.ParseUint(s, 10, 64); err == nil {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}

// posRecord is the fixed-width content of cdr.pos: one write replaces
// it whole.
func posRecord(seg uint64, off int64) []byte {
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
// cut. Called with s.mu held, or before the spool is shared.
func (s *spool) newSegment() error {
	if s.w != nil {
		s.w.Close()
		s.wseg++
	}
	f, err := os.OpenFile(filepath.Join(s.dir, segName(s.wseg)), os.O_CREATE|os.O_WRONLY|os.O_APPEND|os.O_EXCL, 0o640)
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

// stats returns the bytes and CDRs not yet in the store.
func (s *spool) stats() (bytes, cdrs int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pending, s.pendingN
}

// append writes n CDRs (buf, JSON lines) at the end and syncs them to
// disk: all or, when the bound would be passed, none (ErrSpoolFull). hot
// (optional) holds the same CDRs in groups, with their bytes in buf, for
// the drainer to take from memory. Only one goroutine (the Recorder's
// writer) calls it.
func (s *spool) append(buf []byte, n int, hot []hotGroup) error {
	s.mu.Lock()
	if s.pending+int64(len(buf)) > s.max {
		s.mu.Unlock()
		return ErrSpoolFull
	}
	if s.w == nil || s.broken || s.wsize >= s.segMax {
		if err := s.newSegment(); err != nil {
			s.mu.Unlock()
			return fmt.Errorf("history: spool: %w", err)
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
		return fmt.Errorf("history: spool: %w", err)
	}
	s.keepHot(base, hot)
	return nil
}

// free is the room left under the bound, in bytes.
func (s *spool) free() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.max - s.pending
}

// drain writes the synced CDRs to the store in order, up to batch at a
// time, through write, moving the position after each; it stops at the
// first error of write, keeping the rest, and returns nil once it has
// caught up. bad counts lines that could not be read back (lost). Only
// one goroutine (the Recorder's drainer) calls it.
func (s *spool) drain(batch int, write func([]CDR) error) (bad int, err error) {
	for {
		if g, ok := s.takeHot(); ok {
			// On an error g is forgotten: the file still has it.
			if err := write(g.cdrs); err != nil {
				return bad, err
			}
			if err := s.setPos(g.seg, g.end, g.end-g.start, len(g.cdrs)); err != nil {
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
// it). It returns the CDRs written.
func (s *spool) drainSegment(seg uint64, off, end int64, closed bool, batch int, write func([]CDR) error) (written, bad int, err error) {
	path := filepath.Join(s.dir, segName(seg))
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, fmt.Errorf("history: spool: %w", err)
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
	if cap(s.cdrs) < batch {
		s.cdrs = make([]CDR, 0, batch)
	}
	cdrs := s.cdrs
	defer clear(cdrs[:cap(cdrs)]) // let the strings go
	for {
		cdrs = cdrs[:0]
		var n int64
		lines, eof := 0, false
		for len(cdrs) < batch {
			line, err := br.ReadSlice('\n')
			if err == bufio.ErrBufferFull {
				// A line longer than the buffer: no CDR is; skip it.
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
			var c CDR
			if json.Unmarshal(line, &c) != nil {
				bad++
				continue
			}
			cdrs = append(cdrs, c)
		}
		if len(cdrs) > 0 {
			if err := write(cdrs); err != nil {
				return written, bad, err
			}
			written += len(cdrs)
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

// setPos records that the store has what precedes (seg, off): n more
// bytes holding lines CDRs.
func (s *spool) setPos(seg uint64, off, n int64, lines int) error {
	if _, err := s.pos.WriteAt(posRecord(seg, off), 0); err != nil {
		return fmt.Errorf("history: spool: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rseg, s.roff = seg, off
	s.pending -= n
	s.pendingN -= int64(lines)
	return nil
}

func (s *spool) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pos.Close()
	if s.w == nil {
		return nil
	}
	return s.w.Close()
}
