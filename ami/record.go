package ami

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// DefaultRecordMax is the file size at which a Recorder rotates when given
// no size.
const DefaultRecordMax = 64 << 20

// Recorder writes a raw AMI byte stream to files named
// dir/ami-YYYYMMDD-HHMMSS.ami (UTC, with a -N suffix when a name is taken),
// the format `ctibridge replay` reads. It is meant as Config.Record.
//
// It starts a new file for each connection (NewConn, which the Client calls),
// and when a file reaches maxBytes it rotates at the next frame boundary (or
// at the next line once the file is twice that size). It scrubs the value of
// every "Secret:" and "Key:" header line (any case) to "***", even when the
// line is split across writes. Safe for concurrent use.
type Recorder struct {
	// Immutable after NewRotatingRecorder.
	dir string
	max int64
	log *slog.Logger
	now func() time.Time

	mu   sync.Mutex // guards everything below
	f    *os.File
	n    int64 // bytes in f
	err  error // sticky write error
	scr  scrubber
	out  []byte
	name string
}

// NewRotatingRecorder creates dir if needed and returns a recorder writing
// into it. maxBytes <= 0 means DefaultRecordMax. log may be nil.
func NewRotatingRecorder(dir string, maxBytes int64, log *slog.Logger) (*Recorder, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("ami: recorder: %w", err)
	}
	if maxBytes <= 0 {
		maxBytes = DefaultRecordMax
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Recorder{dir: dir, max: maxBytes, log: log.With("component", "ami-record"), now: time.Now}, nil
}

// Name is the path of the file being written, or "" before the first byte.
func (r *Recorder) Name() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.name
}

// NewConn ends the current file, if it holds anything: the next byte starts
// a new one. The Client calls it before each connection.
func (r *Recorder) NewConn() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.out = r.scr.flush(r.out[:0])
	if err := r.writeOut(); err != nil {
		return err
	}
	return r.closeFile()
}

// Write scrubs p and appends it to the current file. It reports len(p)
// unless the file cannot be written.
func (r *Recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return 0, r.err
	}
	out := r.out[:0]
	for _, b := range p {
		var eol, boundary bool
		out, eol, boundary = r.scr.feed(out, b)
		if !eol {
			continue
		}
		size := r.n + int64(len(out))
		if (boundary && size >= r.max) || size >= 2*r.max {
			r.out = out
			if err := r.writeOut(); err != nil {
				return 0, err
			}
			if err := r.closeFile(); err != nil {
				return 0, err
			}
			out = r.out[:0]
		}
	}
	r.out = out
	if err := r.writeOut(); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Close flushes and closes the current file.
func (r *Recorder) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.out = r.scr.flush(r.out[:0])
	err := r.writeOut()
	return errors.Join(err, r.closeFile())
}

// writeOut appends r.out to the file, opening one if needed.
func (r *Recorder) writeOut() error {
	if len(r.out) == 0 {
		return nil
	}
	if r.f == nil {
		if err := r.open(); err != nil {
			r.err = err
			return err
		}
	}
	n, err := r.f.Write(r.out)
	r.n += int64(n)
	r.out = r.out[:0]
	if err != nil {
		r.err = fmt.Errorf("ami: recorder: %w", err)
		return r.err
	}
	return nil
}

func (r *Recorder) open() error {
	base := "ami-" + r.now().UTC().Format("20060102-150405")
	for i := 0; i < 1000; i++ {
		name := base + ".ami"
		if i > 0 {
			name = fmt.Sprintf("%s-%d.ami", base, i)
		}
		path := filepath.Join(r.dir, name)
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("ami: recorder: %w", err)
		}
		r.f, r.n, r.name = f, 0, path
		r.log.Info("ami recording", "file", path)
		return nil
	}
	return fmt.Errorf("ami: recorder: no free file name for %s", base)
}

func (r *Recorder) closeFile() error {
	if r.f == nil {
		return nil
	}
	err := r.f.Close()
	r.f = nil
	if err != nil {
		return fmt.Errorf("ami: recorder: %w", err)
	}
	return nil
}

// scrubber rewrites "Secret: x" and "Key: x" lines to "Secret: ***" in a
// byte stream fed one byte at a time.
type scrubber struct {
	state int
	pre   []byte // start of the current line, while it may be a secret key
}

const (
	scrLineStart = iota // collecting the start of a line in pre
	scrPass             // copying the rest of an ordinary line
	scrSecret           // dropping a secret value up to the line end
)

var secretKeys = []string{"secret:", "key:"}

// feed processes b, appending output to out. eol reports that b ended a
// line; boundary that the line was empty (a frame ended).
func (s *scrubber) feed(out []byte, b byte) (_ []byte, eol, boundary bool) {
	switch s.state {
	case scrPass:
		out = append(out, b)
		if b == '\n' {
			s.state = scrLineStart
			return out, true, false
		}
		return out, false, false
	case scrSecret:
		if b != '\r' && b != '\n' {
			return out, false, false
		}
		out = append(out, " ***"...)
		out = append(out, b)
		if b == '\n' {
			s.state = scrLineStart
			return out, true, false
		}
		s.state = scrPass
		return out, false, false
	}
	s.pre = append(s.pre, b)
	if b == '\n' {
		boundary = len(s.pre) == 1 || (len(s.pre) == 2 && s.pre[0] == '\r')
		out = append(out, s.pre...)
		s.pre = s.pre[:0]
		return out, true, boundary
	}
	if b == '\r' && len(s.pre) == 1 {
		return out, false, false // maybe the CR of an empty line
	}
	for _, k := range secretKeys {
		if len(s.pre) <= len(k) && strings.EqualFold(string(s.pre), k[:len(s.pre)]) {
			if len(s.pre) == len(k) {
				out = append(out, s.pre...)
				s.pre = s.pre[:0]
				s.state = scrSecret
			}
			return out, false, false
		}
	}
	out = append(out, s.pre...)
	s.pre = s.pre[:0]
	s.state = scrPass
	return out, false, false
}

// flush emits what is held back at the end of a stream.
func (s *scrubber) flush(out []byte) []byte {
	if s.state == scrSecret {
		out = append(out, " ***"...)
	}
	out = append(out, s.pre...)
	s.pre = s.pre[:0]
	s.state = scrLineStart
	return out
}
