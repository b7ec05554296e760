package history

import (
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

// drainAll drains s and returns the uniqueids written, in order.
func drainAll(t *testing.T, s *spool) []string {
	t.Helper()
	var ids []string
	if _, err := s.drain(7, func(cdrs []CDR) error {
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
		t.Fatalf("%d CDRs, want %d: %v", len(ids), to-from, ids)
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
		if err := s.append(spoolLines(t, i, i+10)); err != nil {
			t.Fatal(err)
		}
	}
	if segs, _ := segments(dir); len(segs) < 5 {
		t.Fatalf("%d segments for 100 CDRs of 300-byte segments", len(segs))
	}
	// A failing write stops the drain; nothing is lost.
	if _, err := s.drain(7, func([]CDR) error { return errors.New("down") }); err == nil {
		t.Fatal("drain ignored the write error")
	}
	if _, n := s.stats(); n != 100 {
		t.Fatalf("%d pending after a failed drain, want 100", n)
	}
	// Drain 30, then reopen (a restart): the rest, in order.
	var first []string
	errEnough := errors.New("enough")
	s.drain(10, func(cdrs []CDR) error {
		if len(first) >= 30 {
			return errEnough
		}
		for _, c := range cdrs {
			first = append(first, c.UniqueID)
		}
		return nil
	})
	checkIDs(t, first, 0, 30)
	s.close()
	s, err = openSpool(dir, 1<<20, 300)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	if _, n := s.stats(); n != 70 {
		t.Fatalf("reopened with %d pending, want 70", n)
	}
	checkIDs(t, drainAll(t, s), 30, 100)
	if segs, _ := segments(dir); len(segs) != 1 {
		t.Fatalf("segments left after the drain: %v (want only the one being written)", segs)
	}
	if b, n := s.stats(); b != 0 || n != 0 {
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
	s.append(spoolLines(t, 0, 3))
	s.close()
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
	defer s.close()
	s.append(spoolLines(t, 3, 5))
	checkIDs(t, drainAll(t, s), 0, 5)
}

// TestSpoolBound: appends beyond the bound are refused whole.
func TestSpoolBound(t *testing.T) {
	s, err := openSpool(t.TempDir(), 100, defaultSegMax)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	b, n := spoolLines(t, 0, 10)
	if err := s.append(b, n); !errors.Is(err, ErrSpoolFull) {
		t.Fatalf("append past the bound: %v", err)
	}
	if b, n := s.stats(); b != 0 || n != 0 {
		t.Fatalf("a refused append left %d bytes, %d CDRs", b, n)
	}
}

// TestSpoolUpgrade: a single-file spool (cdr.spool and cdr.spool.pos)
// left by an older version is resumed from its position.
func TestSpoolUpgrade(t *testing.T) {
	dir := t.TempDir()
	b, _ := spoolLines(t, 0, 5)
	first, _ := spoolLines(t, 0, 2)
	os.WriteFile(filepath.Join(dir, "cdr.spool"), b, 0o640)
	os.WriteFile(filepath.Join(dir, "cdr.spool.pos"), []byte(strconv.Itoa(len(first))+"\n"), 0o640)
	s, err := openSpool(dir, 1<<20, defaultSegMax)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	checkIDs(t, drainAll(t, s), 2, 5)
	if _, err := os.Stat(filepath.Join(dir, "cdr.spool")); !os.IsNotExist(err) {
		t.Fatalf("the old spool is still there: %v", err)
	}
}
