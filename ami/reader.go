package ami

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// ErrProtocol marks errors that mean the byte stream itself is broken (no
// banner, a frame cut by EOF, a line or frame over its size limit). The
// connection must be dropped and reopened.
var ErrProtocol = errors.New("ami: protocol error")

// ErrTooLarge, always wrapped with ErrProtocol, means a line or a frame
// crossed ReaderConfig's limit. It is returned as soon as the limit is
// crossed, without waiting for an end of line or frame that may never come,
// and counted once: the Reader is broken from then on, every later call
// returning the same error without reading (where the stream would resume
// inside the long line depends on how much of it was buffered).
var ErrTooLarge = errors.New("over the size limit")

// Default limits of a Reader.
const (
	DefaultMaxLine    = 64 << 10 // bytes in one header line, CR LF included
	DefaultMaxMessage = 1 << 20  // bytes in one frame
)

// ReaderConfig sets a Reader's limits. The zero value uses the defaults.
type ReaderConfig struct {
	// MaxLine is the longest header line accepted, in bytes, line end
	// included. Once a line has more bytes than this without its LF,
	// ReadMessage fails with ErrTooLarge (and ErrProtocol), counted in
	// Stats.Oversized: a skipped frame would be a lost event, and a line
	// that never ends would stall the stream. Default DefaultMaxLine.
	MaxLine int
	// MaxMessage is the largest frame accepted, in bytes; crossing it is
	// the same error. Default DefaultMaxMessage.
	MaxMessage int
	// MaxGarbage, when positive, is how many garbage lines plus oversized
	// frames the stream may hold in total before ReadMessage gives up with
	// an error wrapping ErrProtocol (a server uses it against clients that
	// send junk). Default 0: no limit.
	MaxGarbage int
	// OnJunk, when set, is called for every garbage line and oversized line
	// or frame, with a sample of its bytes (valid during the call only), on
	// the reading goroutine. Clean frames never reach it.
	OnJunk func(kind Junk, sample []byte)
}

// ReaderStats counts what a Reader has seen. Read it with Reader.Stats.
type ReaderStats struct {
	Messages  uint64 // frames returned
	Bytes     uint64 // bytes consumed, banner included
	Garbage   uint64 // lines skipped: no "Key:" shape, or CR/NUL inside the line
	Oversized uint64 // lines or frames that crossed MaxLine or MaxMessage (each an error)
}

// Reader frames AMI messages from a byte stream: header lines ended by CRLF
// (a bare LF is accepted too, as real Asterisk sometimes sends one), a blank
// line ending each frame. It never allocates more than two objects per
// message (one string holding the frame, one slice of offsets into it) and
// never holds more than MaxMessage bytes of a frame.
//
// A Reader is not safe for concurrent use.
type Reader struct {
	br      *bufio.Reader
	maxLine int
	maxMsg  int
	maxJunk uint64
	onJunk  func(Junk, []byte)

	buf   []byte  // keys and values of the frame being read, back to back
	offs  []int32 // per header: key end, value end (offsets into buf)
	long  []byte  // a line that did not fit in br's buffer
	stats ReaderStats
	err   error // set once a limit is crossed: the Reader is broken
}

// NewReader reads from br. Give it a bufio.Reader of at least 4 KiB; lines
// longer than its buffer are handled, only more slowly.
func NewReader(br *bufio.Reader, cfg ReaderConfig) *Reader {
	if cfg.MaxLine <= 0 {
		cfg.MaxLine = DefaultMaxLine
	}
	if cfg.MaxMessage <= 0 {
		cfg.MaxMessage = DefaultMaxMessage
	}
	return &Reader{br: br, maxLine: cfg.MaxLine, maxMsg: cfg.MaxMessage, maxJunk: uint64(max(cfg.MaxGarbage, 0)), onJunk: cfg.OnJunk, buf: make([]byte, 0, 1024), offs: make([]int32, 0, 64)}
}

// Stats returns the counters so far.
func (r *Reader) Stats() ReaderStats { return r.stats }

// ReadBanner reads the greeting line Asterisk sends on connect, such as
// "Asterisk Call Manager/11.0.0", and returns it without its line end.
func (r *Reader) ReadBanner() (string, error) {
	if r.err != nil {
		return "", r.err
	}
	line, err := r.readLine()
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		if errors.Is(err, ErrProtocol) {
			return "", err
		}
		return "", fmt.Errorf("%w: banner: %w", ErrProtocol, err)
	}
	if bytes.IndexByte(line, ':') >= 0 || len(line) == 0 {
		return "", fmt.Errorf("%w: banner: unexpected line %.80q", ErrProtocol, line)
	}
	return string(line), nil
}

// ReadMessage returns the next frame. Blank lines between frames and lines
// that are not headers are skipped (and counted). It returns io.EOF at a
// clean end of stream, an error wrapping ErrProtocol and
// io.ErrUnexpectedEOF when the stream ends mid-frame, and one wrapping
// ErrProtocol and ErrTooLarge as soon as a line or frame crosses its limit
// (and for every call after that).
func (r *Reader) ReadMessage() (Message, error) {
	if r.err != nil {
		return Message{}, r.err
	}
	if m, ok := r.readFast(); ok {
		return m, nil
	}
	r.buf = r.buf[:0]
	r.offs = r.offs[:0]
	size := 0
	for {
		line, err := r.readLine()
		if err != nil {
			if err == io.EOF && len(r.offs) == 0 {
				return Message{}, io.EOF
			}
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			if errors.Is(err, ErrProtocol) {
				return Message{}, err
			}
			return Message{}, fmt.Errorf("%w: %w", ErrProtocol, err)
		}
		if len(line) == 0 {
			if len(r.offs) == 0 {
				continue // blank line between frames
			}
			return r.finish(), nil
		}
		size += len(line) + 2
		if size > r.maxMsg {
			r.stats.Oversized++
			r.junk(JunkLongFrame, line)
			r.err = fmt.Errorf("%w: frame %w of %d bytes", ErrProtocol, ErrTooLarge, r.maxMsg)
			return Message{}, r.err
		}
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 || bytes.IndexByte(line, 0) >= 0 || bytes.IndexByte(line, '\r') >= 0 {
			r.stats.Garbage++
			if colon > 0 {
				r.junk(JunkControl, line)
			} else {
				r.junk(JunkGarbage, line)
			}
			if err := r.checkJunk(); err != nil {
				return Message{}, err
			}
			continue
		}
		v := line[colon+1:]
		for len(v) > 0 && (v[0] == ' ' || v[0] == '\t') {
			v = v[1:]
		}
		r.buf = append(r.buf, line[:colon]...)
		r.offs = append(r.offs, int32(len(r.buf)))
		r.buf = append(r.buf, v...)
		r.offs = append(r.offs, int32(len(r.buf)))
	}
}

func (r *Reader) junk(kind Junk, sample []byte) {
	if r.onJunk != nil {
		r.onJunk(kind, sample)
	}
}

func (r *Reader) checkJunk() error {
	if r.maxJunk > 0 && r.stats.Garbage+r.stats.Oversized > r.maxJunk {
		return fmt.Errorf("%w: more than %d garbage lines and oversized frames", ErrProtocol, r.maxJunk)
	}
	return nil
}

// readFast frames a message straight out of the bufio buffer when a whole,
// clean frame is already there, which is nearly always: one scan for line
// ends and one for colons per line, one copy of the frame into its string,
// and no per-line calls into bufio. Anything unusual (a frame that spans
// the buffer's end, garbage, limits, CR or NUL inside a line) returns
// ok=false with nothing consumed, and ReadMessage takes the line-by-line
// path that handles every case.
func (r *Reader) readFast() (Message, bool) {
	if r.br.Buffered() == 0 {
		r.br.Peek(1) // fill; an error is left for the slow path to see
	}
	buf, _ := r.br.Peek(r.br.Buffered())
	start := 0
	for { // blank lines between frames: CRs then LF
		j := start
		for j < len(buf) && buf[j] == '\r' {
			j++
		}
		if j == len(buf) || buf[j] != '\n' {
			break
		}
		start = j + 1
	}
	offs := r.offs[:0] // per header: key start, key end, value start, value end
	crs := 0           // CRs that end lines; any other CR is garbage
	size := 0
	pos := start
	for {
		nl := bytes.IndexByte(buf[pos:], '\n')
		if nl < 0 || nl+1 > r.maxLine {
			return Message{}, false
		}
		end := pos + nl
		lineEnd := end
		for lineEnd > pos && buf[lineEnd-1] == '\r' {
			lineEnd--
			crs++
		}
		if lineEnd == pos { // the blank line closing the frame
			if len(offs) == 0 {
				return Message{}, false
			}
			pos = end + 1
			break
		}
		// The same size accounting as the slow path: line without its
		// end, plus two.
		if size += lineEnd - pos + 2; size > r.maxMsg {
			return Message{}, false
		}
		colon := bytes.IndexByte(buf[pos:lineEnd], ':')
		if colon <= 0 {
			return Message{}, false
		}
		v := pos + colon + 1
		for v < lineEnd && (buf[v] == ' ' || buf[v] == '\t') {
			v++
		}
		offs = append(offs, int32(pos-start), int32(pos+colon-start), int32(v-start), int32(lineEnd-start))
		pos = end + 1
	}
	frame := buf[start:pos]
	if bytes.Count(frame, []byte{'\r'}) != crs || bytes.IndexByte(frame, 0) >= 0 {
		return Message{}, false
	}
	r.offs = offs
	// The frame's own bytes are the message's text: the offsets point at
	// keys and values inside it, separators and line ends included.
	m := Message{text: string(frame), idx: make([]int32, len(offs))}
	copy(m.idx, offs)
	r.br.Discard(pos)
	r.stats.Bytes += uint64(pos)
	r.stats.Messages++
	return m, true
}

// finish turns the collected frame into a Message: one string, one
// offset slice (keys and values are back to back in r.buf).
func (r *Reader) finish() Message {
	m := Message{text: string(r.buf), idx: make([]int32, 2*len(r.offs))}
	start := int32(0)
	for i := 0; i < len(r.offs); i += 2 {
		kEnd, vEnd := r.offs[i], r.offs[i+1]
		m.idx[2*i], m.idx[2*i+1], m.idx[2*i+2], m.idx[2*i+3] = start, kEnd, kEnd, vEnd
		start = vEnd
	}
	r.stats.Messages++
	return m
}

// readLine returns the next line without its LF and trailing CRs. The slice
// is valid until the next call. A line longer than MaxLine is an error
// wrapping ErrTooLarge, returned as soon as MaxLine+1 bytes without a LF
// have arrived: it never waits for a LF that may never come.
func (r *Reader) readLine() ([]byte, error) {
	r.long = r.long[:0] // the line so far, when it outgrew br's buffer
	spilled := false
	seen := 0 // bytes of the buffer already known to hold no LF
	for {
		buf, _ := r.br.Peek(r.br.Buffered())
		if i := bytes.IndexByte(buf[seen:], '\n'); i >= 0 {
			n := seen + i + 1
			if len(r.long)+n > r.maxLine {
				return nil, r.tooLong(r.long, buf[:n])
			}
			line := buf[:n]
			if spilled {
				r.long = append(r.long, line...)
				line = r.long
			}
			r.br.Discard(n)
			r.stats.Bytes += uint64(n)
			return trimLineEnd(line), nil
		}
		if len(r.long)+len(buf) > r.maxLine {
			return nil, r.tooLong(r.long, buf)
		}
		if len(buf) == r.br.Size() {
			// A full buffer and no LF: keep what we have aside.
			r.long = append(r.long, buf...)
			spilled = true
			r.br.Discard(len(buf))
			r.stats.Bytes += uint64(len(buf))
			seen = 0
			continue
		}
		seen = len(buf)
		if _, err := r.br.Peek(seen + 1); err != nil {
			if len(r.long)+seen > 0 {
				if err == io.EOF {
					err = io.ErrUnexpectedEOF // a last line without its LF
				}
				r.br.Discard(seen)
				r.stats.Bytes += uint64(seen)
			}
			return nil, err
		}
	}
}

// trimLineEnd drops the LF and any CRs before it.
func trimLineEnd(line []byte) []byte {
	line = line[:len(line)-1]
	for len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	return line
}

// tooLong counts and reports a line over the limit, and breaks the Reader:
// spilled is what was set aside, if anything, buf what is in br's buffer.
func (r *Reader) tooLong(spilled, buf []byte) error {
	r.stats.Oversized++
	if len(spilled) > 0 {
		buf = spilled
	}
	r.junk(JunkLongLine, buf)
	r.err = fmt.Errorf("%w: line %w of %d bytes", ErrProtocol, ErrTooLarge, r.maxLine)
	return r.err
}
