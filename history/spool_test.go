package history

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

// The spool itself is package wal's, tested there; what is history's own
// is the upgrade from the single-file format.

// TestSpoolUpgrade: a single-file spool (cdr.spool and cdr.spool.pos)
// left by an older version is resumed from its position.
func TestSpoolUpgrade(t *testing.T) {
	dir := t.TempDir()
	var b []byte
	var pos int // after the first two CDRs
	for i := range 5 {
		line, err := json.Marshal(CDR{UniqueID: "u." + strconv.Itoa(i)})
		if err != nil {
			t.Fatal(err)
		}
		if b = append(append(b, line...), '\n'); i == 1 {
			pos = len(b)
		}
	}
	os.WriteFile(filepath.Join(dir, "cdr.spool"), b, 0o640)
	os.WriteFile(filepath.Join(dir, "cdr.spool.pos"), []byte(strconv.Itoa(pos)+"\n"), 0o640)
	s, err := openSpool(dir, 1<<20, defaultSegMax)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var ids []string
	if _, err := s.Drain(7, func(cdrs []CDR) error {
		for _, c := range cdrs {
			ids = append(ids, c.UniqueID)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"u.2", "u.3", "u.4"}; !slices.Equal(ids, want) {
		t.Fatalf("drained %v, want %v", ids, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "cdr.spool")); !os.IsNotExist(err) {
		t.Fatalf("the old spool is still there: %v", err)
	}
}
