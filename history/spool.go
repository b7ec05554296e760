package history

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// ErrSpoolFull: the spool reached its bound; the CDR was dropped.
var ErrSpoolFull = errors.New("history: spool full")

// spool is an append-only file of JSON lines (one CDR each) and a
// position file saying how far it has been written to the database. It is
// drained from the position, in order; once drained both are truncated.
// A crash between a database write and the position update re-sends
// rows, which (uniqueid, sequence) makes harmless.
type spool struct {
	dir string
	max int64

	mu   sync.Mutex // guards everything below
	f    *os.File   // the spool, opened for append
	size int64      // bytes in the spool file
	pos  int64      // bytes already written to the database
}

func openSpool(dir string, max int64) (*spool, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("history: spool: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "cdr.spool"), os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o640)
	if err != nil {
		return nil, fmt.Errorf("history: spool: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("history: spool: %w", err)
	}
	s := &spool{dir: dir, max: max, f: f, size: st.Size()}
	if b, err := os.ReadFile(s.posPath()); err == nil {
		s.pos, _ = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	}
	if s.pos > s.size || s.pos < 0 {
		s.pos = 0
	}
	return s, nil
}

func (s *spool) posPath() string { return filepath.Join(s.dir, "cdr.spool.pos") }

// pending reports whether there are CDRs not yet written.
func (s *spool) pending() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.size > s.pos
}

// bytes is the size of what is not yet written.
func (s *spool) bytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.size - s.pos
}

// append adds CDRs at the end, all or, when the bound would be passed,
// none (ErrSpoolFull).
func (s *spool) append(cdrs []CDR) error {
	var buf []byte
	for _, c := range cdrs {
		b, err := json.Marshal(c)
		if err != nil {
			return err
		}
		buf = append(append(buf, b...), '\n')
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.size-s.pos+int64(len(buf)) > s.max {
		return ErrSpoolFull
	}
	n, err := s.f.Write(buf)
	s.size += int64(n)
	if err != nil {
		return fmt.Errorf("history: spool: %w", err)
	}
	return nil
}

// drain writes spooled CDRs in order, batch by batch, through write;
// it stops at the first error, keeping the rest.
func (s *spool) drain(batch int, write func([]CDR) error) error {
	s.mu.Lock()
	pos, size := s.pos, s.size
	s.mu.Unlock()
	if pos >= size {
		return nil
	}
	r, err := os.Open(filepath.Join(s.dir, "cdr.spool"))
	if err != nil {
		return fmt.Errorf("history: spool: %w", err)
	}
	defer r.Close()
	if _, err := r.Seek(pos, io.SeekStart); err != nil {
		return fmt.Errorf("history: spool: %w", err)
	}
	br := bufio.NewReaderSize(io.LimitReader(r, size-pos), 64<<10)
	for pos < size {
		var cdrs []CDR
		n := int64(0)
		for len(cdrs) < batch {
			line, err := br.ReadBytes('\n')
			if err != nil {
				break // EOF, or a torn last line: stop there
			}
			n += int64(len(line))
			var c CDR
			if json.Unmarshal(line, &c) == nil {
				cdrs = append(cdrs, c)
			}
		}
		if n == 0 {
			break
		}
		if len(cdrs) > 0 {
			if err := write(cdrs); err != nil {
				return err
			}
		}
		pos += n
		if err := s.setPos(pos); err != nil {
			return err
		}
	}
	return nil
}

// setPos records progress; when everything is written it truncates the
// spool (under the lock, so no append is lost).
func (s *spool) setPos(pos int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if pos >= s.size {
		if err := s.f.Truncate(0); err != nil {
			return fmt.Errorf("history: spool: %w", err)
		}
		s.size, s.pos = 0, 0
		return os.WriteFile(s.posPath(), []byte("0\n"), 0o640)
	}
	s.pos = pos
	return os.WriteFile(s.posPath(), []byte(strconv.FormatInt(pos, 10)+"\n"), 0o640)
}

func (s *spool) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.f.Close()
}
