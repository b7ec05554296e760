package wal

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

func spoolLines(t *testing.T, from, to int) ([]byte, int) {
	t.Helper()
	var b []byte
	for i := from; i < to; i++ {
		line, err := json.Marshal(CDR{UniqueID: "u." + strconv.Itoa(i)})
		if err != nil {
			t.Fatal(err)
		}
		b = append(append(b, line...), '\n')
	}
	return b, to - from
}

// lines is append's arguments for b holding n lines, none in memory.
func lines(b []byte, n int) ([]byte, int, []Group[CDR]) { return b, n, nil }

// drainAll drains s and returns the uniqueids written, in order.
func drainAll(t *testing.T, s *spool) []string {
	t.Helper()
	var ids []string
	if _, err := s.Drain(7, func(cdrs []CDR) error {
		for _, c := range cdrs {
			ids = append(ids, c.UniqueID)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return ids
}

func checkIDs(t *testing.T, ids []string, from, to int) {
	t.Helper()
	if len(ids) != to-from {
		t.Fatalf("%d CDRs, want %d", len(ids), to-from)
	}
	for i, id := range ids {
		if want := "u." + strconv.Itoa(from+i); id != want {
			t.Fatalf("CDR %d is %s, want %s", i, id, want)
		}
	}
}

// TestSpoolSegments: the spool rotates past its segment size, drains in
// order across segments, deletes the ones it finished, and resumes a
// half-drained segment after a reopen.
func TestSpoolSegments(t *testing.T) {
	dir := t.TempDir()
	s, err := openSpool(dir, 1<<20, 300)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i += 10 {
		if err := s.Append(lines(spoolLines(t, i, i+10))); err != nil {
			t.Fatal(err)
		}
	}
	if segs, _ := segments(dir); len(segs) < 5 {
		t.Fatalf("%d segments for 100 CDRs of 300-byte segments", len(segs))
	}
	// A failing write stops the drain; nothing is lost.
	if _, err := s.Drain(7, func([]CDR) error { return errors.New("down") }); err == nil {
		t.Fatal("drain ignored the write error")
	}
	if _, n := s.Stats(); n != 100 {
		t.Fatalf("%d pending after a failed drain, want 100", n)
	}
	// Drain 30, then reopen (a restart): the rest, in order.
	var first []string
	errEnough := errors.New("enough")
	s.Drain(10, func(cdrs []CDR) error {
		if len(first) >= 30 {
			return errEnough
		}
		for _, c := range cdrs {
			first = append(first, c.UniqueID)
		}
		return nil
	})
	checkIDs(t, first, 0, 30)
	s.Close()
	s, err = openSpool(dir, 1<<20, 300)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, n := s.Stats(); n != 70 {
		t.Fatalf("reopened with %d pending, want 70", n)
	}
	checkIDs(t, drainAll(t, s), 30, 100)
	if segs, _ := segments(dir); len(segs) != 1 {
		t.Fatalf("segments left after the drain: %v (want only the one being written)", segs)
	}
	if b, n := s.Stats(); b != 0 || n != 0 {
		t.Fatalf("pending %d bytes, %d CDRs after the drain", b, n)
	}
}

// TestSpoolTornLine: a line a crash cut short is skipped, the lines
// before it are kept, and nothing is ever appended after it.
func TestSpoolTornLine(t *testing.T) {
	dir := t.TempDir()
	s, err := openSpool(dir, 1<<20, defaultSegMax)
	if err != nil {
		t.Fatal(err)
	}
	s.Append(lines(spoolLines(t, 0, 3)))
	s.Close()
	segs, _ := segments(dir)
	f, err := os.OpenFile(filepath.Join(dir, segName(segs[len(segs)-1])), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"uniqueid":"torn`)
	f.Close()
	s, err = openSpool(dir, 1<<20, defaultSegMax)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.Append(lines(spoolLines(t, 3, 5)))
	checkIDs(t, drainAll(t, s), 0, 5)
}

// TestSpoolBound: appends beyond the bound are refused whole.
func TestSpoolBound(t *testing.T) {
	s, err := openSpool(t.TempDir(), 100, defaultSegMax)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b, n := spoolLines(t, 0, 10)
	if err := s.Append(b, n, nil); !errors.Is(err, ErrFull) {
		t.Fatalf("append past the bound: %v", err)
	}
	if b, n := s.Stats(); b != 0 || n != 0 {
		t.Fatalf("a refused append left %d bytes, %d CDRs", b, n)
	}
}

// hotLines is append's arguments for CDRs from..to kept in memory too, in
// groups of size.
func hotLines(t *testing.T, from, to, size int) ([]byte, int, []Group[CDR]) {
	t.Helper()
	var b []byte
	var hot []Group[CDR]
	for i := from; i < to; i += size {
		chunk, n := spoolLines(t, i, min(i+size, to))
		g := Group[CDR]{Start: int64(len(b))}
		b = append(b, chunk...)
		g.End = int64(len(b))
		for j := range n {
			g.Items = append(g.Items, CDR{UniqueID: "u." + strconv.Itoa(i+j)})
		}
		hot = append(hot, g)
	}
	return b, to - from, hot
}

// TestSpoolHot: CDRs kept in memory are written from it when the drain
// is at their position, from the file otherwise (after a failed write,
// past the memory bound, a drain cut inside a group), never twice and
// always in order.
func TestSpoolHot(t *testing.T) {
	s, err := openSpool(t.TempDir(), 1<<30, 2000)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Append(hotLines(t, 0, 30, 10)); err != nil {
		t.Fatal(err)
	}
	// A failed write forgets the group in memory; the file has it.
	if _, err := s.Drain(100, func([]CDR) error { return errors.New("down") }); err == nil {
		t.Fatal("no error")
	}
	// A drain cut inside the second group (batch 15 from the file).
	var ids []string
	calls := 0
	s.Drain(15, func(cdrs []CDR) error {
		if calls++; calls > 1 {
			return errors.New("cut")
		}
		for _, c := range cdrs {
			ids = append(ids, c.UniqueID)
		}
		return nil
	})
	checkIDs(t, ids, 0, 15)
	// More than maxHot in memory, over several segments: the oldest are
	// read from the file.
	last := 30
	for ; last < 30+2*maxHot; last += 500 {
		if err := s.Append(hotLines(t, last, last+500, 100)); err != nil {
			t.Fatal(err)
		}
	}
	if s.hotN > maxHot {
		t.Fatalf("%d CDRs in memory, bound %d", s.hotN, maxHot)
	}
	ids = append(ids, drainAll(t, s)...)
	checkIDs(t, ids, 0, last)
	if len(s.hot) != 0 || s.hotN != 0 {
		t.Fatalf("memory left after the drain: %d groups, %d CDRs", len(s.hot), s.hotN)
	}
	if b, n := s.Stats(); b != 0 || n != 0 {
		t.Fatalf("pending %d bytes, %d CDRs after the drain", b, n)
	}

	// Caught up, a new group is written from memory: spoil it on disk
	// and it still arrives whole.
	if err := s.Append(hotLines(t, last, last+10, 10)); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	seg, end := s.wseg, s.wsize
	s.mu.Unlock()
	f, err := os.OpenFile(filepath.Join(s.dir, segName(seg)), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt(bytes.Repeat([]byte("x"), int(end)), 0)
	f.Close()
	ids = nil
	bad, err := s.Drain(100, func(cdrs []CDR) error {
		for _, c := range cdrs {
			ids = append(ids, c.UniqueID)
		}
		return nil
	})
	if err != nil || bad != 0 {
		t.Fatalf("drain: %d bad lines, %v: read from the file, not from memory", bad, err)
	}
	checkIDs(t, ids, last, last+10)
}

// The record the tests append: a CDR's uniqueid is enough.
type CDR struct {
	UniqueID string `json:"uniqueid"`
}

type spool = Log[CDR]

const defaultSegMax = DefaultSegMax

func openSpool(dir string, max, segMax int64) (*spool, error) {
	return Open[CDR](dir, Options{Prefix: "cdr", Max: max, SegMax: segMax})
}

func segName(n uint64) string { return SegName("cdr", n) }

func segments(dir string) ([]uint64, error) { return Segments(dir, "cdr") }
