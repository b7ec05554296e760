package ws

import (
	"encoding/json"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// Reading: the client's frames are read by this package, not by gorilla
// (which only upgrades): each read takes exactly one frame's header, then
// its payload, and never a byte beyond, so between messages nothing of the
// client's is held in memory and the connection can wait for its next
// message with no goroutine at all (park.go). A message's payload goes
// into a buffer borrowed for that message; control frames are answered on
// the way. Client frames must be masked and use no extension (RFC 6455
// section 5); a message is at most maxClientMessage bytes.

// maxClientMessage bounds a client message: beyond it the client is
// closed with 1009.
const maxClientMessage = 4096

// readBufs are the reader's message buffers, borrowed for one message, so
// an idle connection holds none.
// Past the message's room they have 125 bytes for a control frame's
// payload.
var readBufs = sync.Pool{New: func() any { b := make([]byte, 0, maxClientMessage+125); return &b }}

var (
	errBadMessage = errors.New("ws: message is not a JSON object with an op")
	// errClosing: the reader has asked for a close (a protocol error, a
	// message too big, a flood); the caller drains.
	errClosing = errors.New("ws: closing")
	// errNoMessage: a control frame came, and no message.
	errNoMessage = errors.New("ws: no message")
	// errClientClose: the client closed (its close frame was answered).
	errClientClose = errors.New("ws: client closed")
)

// header is a frame's header as read.
type header struct {
	fin  bool
	op   byte
	n    int64 // payload length
	mask [4]byte
}

// readHeader reads the next frame's header into c.hdr (the header only:
// no byte of the payload, whether or not the frame is masked). A frame
// the protocol forbids from a client closes with 1002 and returns
// errClosing, once its payload is read past.
func (c *conn) readHeader() (header, error) {
	var h header
	// Two bytes tell how long the rest of the header is: the extended
	// length, and the mask when there is one (a client's frame that has
	// none is refused below, after reading exactly its header).
	if _, err := io.ReadFull(c.nc, c.hdr[:2]); err != nil {
		return h, err
	}
	b0, b1 := c.hdr[0], c.hdr[1]
	h.fin, h.op, h.n = b0&0x80 != 0, b0&0x0F, int64(b1&0x7F)
	masked := b1&0x80 != 0
	ext := 0
	switch h.n {
	case 126:
		ext = 2
	case 127:
		ext = 8
	}
	rest := ext
	if masked {
		rest += 4
	}
	if rest > 0 {
		if _, err := io.ReadFull(c.nc, c.hdr[2:2+rest]); err != nil {
			return h, err
		}
	}
	if ext > 0 {
		h.n = 0
		for _, x := range c.hdr[2 : 2+ext] {
			h.n = h.n<<8 | int64(x)
		}
	}
	if masked {
		copy(h.mask[:], c.hdr[2+ext:6+ext])
	}
	switch {
	case b0&0x70 != 0:
		return h, c.protocolError(h, "reserved bits set")
	case !masked:
		return h, c.protocolError(h, "client frame not masked")
	case h.n < 0:
		return h, c.protocolError(h, "bad payload length")
	case h.op > opPong || h.op > 2 && h.op < opClose:
		return h, c.protocolError(h, "unknown opcode")
	case h.op >= opClose && (!h.fin || h.n > 125):
		return h, c.protocolError(h, "control frame fragmented or over 125 bytes")
	}
	return h, nil
}

// protocolError closes for the frame h, after reading past its payload
// so that what follows (the close reply) can be read.
func (c *conn) protocolError(h header, text string) error {
	c.closeWith(websocket.CloseProtocolError, text, "protocol", false)
	c.skip(h)
	return errClosing
}

// skip reads past h's payload.
func (c *conn) skip(h header) error {
	_, err := io.CopyN(io.Discard, c.nc, h.n)
	return err
}

// readPayload reads h's payload into b (which has room) and unmasks it.
func (c *conn) readPayload(h header, b []byte) error {
	if _, err := io.ReadFull(c.nc, b); err != nil {
		return err
	}
	for i := range b {
		b[i] ^= h.mask[i&3]
	}
	return nil
}

// nextMessage reads the client's next message, whose first frame's
// header is h, into b (borrowed, with room for maxClientMessage+125
// bytes), answering the control frames within it; it returns the
// message's opcode and payload, or opcode 0 and no error after a control
// frame between messages.
func (c *conn) nextMessage(h header, b []byte) (byte, []byte, error) {
	b = b[:0]
	var op byte // of the message being read; 0 before its first frame
	for first := true; ; first = false {
		if !first {
			var err error
			if h, err = c.readHeader(); err != nil {
				return 0, nil, err
			}
		}
		if h.op >= opClose {
			if err := c.control(h, b[len(b):cap(b)]); err != nil || op == 0 {
				return 0, nil, err // between messages: the reader may park
			}
			continue
		}
		switch {
		case h.op == 0 && op == 0:
			return 0, nil, c.protocolError(h, "continuation frame with no message")
		case h.op != 0 && op != 0:
			return 0, nil, c.protocolError(h, "new message inside a fragmented one")
		case h.op != 0:
			op = h.op
		}
		if h.n > int64(maxClientMessage-len(b)) {
			c.closeWith(websocket.CloseMessageTooBig, "message too big", "protocol", false)
			c.skip(h)
			return 0, nil, errClosing
		}
		n := len(b)
		b = b[:n+int(h.n)]
		if err := c.readPayload(h, b[n:]); err != nil {
			return 0, nil, err
		}
		if h.fin {
			return op, b, nil
		}
	}
}

// control serves a control frame, its payload read into scratch (room for
// 125 bytes). Each counts against the client's budget like a message.
func (c *conn) control(h header, scratch []byte) error {
	p := scratch[:h.n]
	if err := c.readPayload(h, p); err != nil {
		return err
	}
	switch h.op {
	case opPing:
		if c.spend(1) {
			c.pushReply(pongFrame(p), entWSPong)
		}
	case opPong:
		// Charged only: the reader noted that the client was heard
		// before reading (serveMessages).
		c.spend(1)
	case opClose:
		c.clientClose(p)
		return errClientClose
	}
	if c.isClosing() {
		return errClosing
	}
	return nil
}

// clientClose answers the client's close frame with the same code, unless
// the server's close went first (then this is its reply).
func (c *conn) clientClose(p []byte) {
	c.mu.Lock()
	echo := c.closing == nil
	if echo {
		c.closing = []byte{}
		c.reason = "client"
	}
	c.mu.Unlock()
	if !echo {
		return
	}
	code := websocket.CloseNoStatusReceived
	if len(p) >= 2 {
		code = int(p[0])<<8 | int(p[1])
	}
	switch {
	case code == websocket.CloseNoStatusReceived:
		code = websocket.CloseNormalClosure
	case len(p) == 1 || !validCloseCode(code):
		code = websocket.CloseProtocolError
	}
	c.nc.SetWriteDeadline(time.Now().Add(time.Second))
	c.nc.Write(closeFrame(code, ""))
}

// validCloseCode: the codes a peer may send (RFC 6455 section 7.4).
func validCloseCode(code int) bool {
	switch {
	case code >= 1000 && code <= 1003, code >= 1007 && code <= 1014:
		return true
	}
	return code >= 3000 && code <= 4999
}

// read reads the next message into a buffer borrowed once its first
// header is in (a reader blocked waiting for it holds none), and decodes
// it.
func (c *conn) read() (clientMsg, error) {
	var m clientMsg
	h, err := c.readHeader()
	if err != nil {
		return m, err
	}
	bp := readBufs.Get().(*[]byte)
	defer readBufs.Put(bp)
	op, b, err := c.nextMessage(h, (*bp)[:0])
	if err != nil {
		return m, err
	}
	if op == 0 {
		return m, errNoMessage
	}
	if op != opText || json.Unmarshal(b, &m) != nil || m.Op == "" {
		return m, errBadMessage
	}
	return m, nil
}

// drain reads until the client's close reply, an error or the deadline
// the flusher sets once the close is out, discarding what it reads, no
// faster than the client's budget allows: a client closed for sending too
// much is not read at its own pace (its writes block instead) while the
// close goes out.
func (c *conn) drain() {
	for {
		if d := c.budget.wait(c.h.now()); d > 0 {
			time.Sleep(min(d, c.h.cfg.CloseWait))
		}
		h, err := c.readHeader()
		if errors.Is(err, errClosing) {
			continue // a frame the protocol forbids, skipped
		}
		if err != nil {
			return
		}
		// Every byte is read, the close reply's too: a socket closed
		// with unread bytes sends a reset, which can cost the client
		// what it has not read yet.
		if err := c.skip(h); err != nil || h.op == opClose {
			return
		}
		c.budget.spend(c.h.now(), 1)
	}
}

// isClosing reports whether a close is under way.
func (c *conn) isClosing() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closing != nil
}
