package history

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ctibridge/ctibridge/wal"
)

// ErrSpoolFull: the spool reached its bound; the CDRs were dropped.
var ErrSpoolFull = wal.ErrFull

// spool is the Recorder's write-ahead log (package wal): every CDR is
// appended to it and fsynced before it counts as taken, then written to
// the store from it, in order. A crash between a store write and the
// position update re-sends rows, which the store's (uniqueid, sequence)
// key ignores.
type spool = wal.Log[CDR]

// hotGroup is a group of CDRs kept in memory after the append.
type hotGroup = wal.Group[CDR]

// spoolPrefix names the spool's files: cdr-<n>.spool and cdr.pos.
const spoolPrefix = "cdr"

const defaultSegMax = wal.DefaultSegMax

// openSpool opens the spool in dir, resuming what a previous process
// left (including a spool of the single-file format, cdr.spool).
func openSpool(dir string, max, segMax int64) (*spool, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("history: spool: %w", err)
	}
	if err := upgradeSpool(dir); err != nil {
		return nil, fmt.Errorf("history: spool: %w", err)
	}
	return wal.Open[CDR](dir, wal.Options{Prefix: spoolPrefix, Max: max, SegMax: segMax})
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
	if err := os.WriteFile(filepath.Join(dir, "cdr.pos"), wal.PosRecord(0, off), 0o640); err != nil {
		return err
	}
	if err := os.Rename(old, filepath.Join(dir, wal.SegName(spoolPrefix, 0))); err != nil {
		return err
	}
	os.Remove(old + ".pos")
	return nil
}
