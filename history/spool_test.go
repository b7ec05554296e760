package history

import (
	"encoding/json"
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
	defer s.Close()
	checkIDs(t, drainAll(t, s), 2, 5)
	if _, err := os.Stat(filepath.Join(dir, "cdr.spool")); !os.IsNotExist(err) {
		t.Fatalf("the old spool is still there: %v", err)
	}
}
