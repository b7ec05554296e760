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
	var got []CDR
	if _, err := s.Drain(7, func(cdrs []CDR) error { got = append(got, cdrs...); return nil }); err != nil {
		t.Fatal(err)
	}
	want := []CDR{{UniqueID: "u.2"}, {UniqueID: "u.3"}, {UniqueID: "u.4"}}
	if !slices.EqualFunc(got, want, func(a, b CDR) bool { return a.UniqueID == b.UniqueID }) {
		t.Fatalf("drained %+v, want the CDRs u.2 to u.4", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "cdr.spool")); !os.IsNotExist(err) {
		t.Fatalf("the old spool is still there: %v", err)
	}
}
