package bus

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"github.com/ctibridge/ctibridge/ami"
)

// The binary encoding of the op log (docs/scale-out.md, "Payloads"). Every
// bus message starts with a version byte and a kind byte; integers are
// varints, strings and byte strings a uvarint length then the bytes. An
// ami.Message is its header count then key, value per header.

// version is the first byte of every bus message; a node refuses any other.
const version = 1

// Message kinds (the second byte).
const (
	kindOps     = 1 // engine ops, one batch or a chunk of one
	kindGenesis = 2 // the first message of a stream: generation id, creation time
	kindLead    = 3 // a bridge took the lead: node name, engine config fingerprint
	kindStall   = 4 // a watcher saw the leader silent: node name, time (stall.go)
)

// ErrCorrupt wraps every decoding error: the message is not what this
// version writes (truncated, unknown op, bad length).
var ErrCorrupt = errors.New("bus: corrupt message")

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendMessage(b []byte, m ami.Message) []byte {
	n := m.Len()
	b = binary.AppendUvarint(b, uint64(n))
	for i := range n {
		h := m.Header(i)
		b = appendString(b, h.Key)
		b = appendString(b, h.Value)
	}
	return b
}

func appendMessages(b []byte, ms []ami.Message) []byte {
	b = binary.AppendUvarint(b, uint64(len(ms)))
	for _, m := range ms {
		b = appendMessage(b, m)
	}
	return b
}

// decoder reads one bus message; the first error sticks.
type decoder struct {
	b   []byte
	err error
	hs  []ami.Header // scratch for messages
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = corrupt(format, args...)
	}
	d.b = nil
}

func (d *decoder) byte() byte {
	if len(d.b) == 0 {
		d.fail("truncated")
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) string() string {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail("string of %d bytes, %d left", n, len(d.b))
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// count reads a count of items each at least min bytes long, refusing a
// count the rest of the message cannot hold (no huge allocation on junk).
func (d *decoder) count(min int) int {
	n := d.uvarint()
	if n > uint64(len(d.b)/min+1) {
		d.fail("count %d exceeds the message", n)
		return 0
	}
	return int(n)
}

// view is string without the copy: the header strings only live until
// ami.NewMessage has copied them into the message's own text.
func (d *decoder) view() string {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail("string of %d bytes, %d left", n, len(d.b))
		return ""
	}
	if n == 0 {
		return ""
	}
	s := unsafe.String(&d.b[0], int(n))
	d.b = d.b[n:]
	return s
}

func (d *decoder) message() ami.Message {
	n := d.count(2)
	hs := d.hs[:0]
	for range n {
		k := d.view()
		v := d.view()
		hs = append(hs, ami.Header{Key: k, Value: v})
	}
	d.hs = hs
	if d.err != nil {
		return ami.Message{}
	}
	return ami.NewMessage(hs...)
}

func (d *decoder) messages() []ami.Message {
	n := d.count(1)
	if n == 0 {
		return nil
	}
	out := make([]ami.Message, 0, n)
	for range n {
		out = append(out, d.message())
	}
	return out
}

// header checks the version byte and returns the kind.
func (d *decoder) header() byte {
	if v := d.byte(); d.err == nil && v != version {
		d.fail("version %d, this node reads %d", v, version)
	}
	return d.byte()
}

// genesis is the first message of a generation of the op log: the
// stream's first, and each rollover's (rollover.go). Every node restarts
// its engines at a genesis, so the messages before it are needed by
// nobody.
type genesis struct {
	ID      string // names the stream's seq space: the WebSocket epoch, the same in every generation
	Created int64  // Unix ms: the restarted engines' clock
	Gen     uint64 // generation number, 1 for the stream's first
	Base    uint64 // the feed seq the engines restart at (0 in the first generation)
}

func (g genesis) encode() []byte {
	b := []byte{version, kindGenesis}
	b = appendString(b, g.ID)
	b = binary.AppendVarint(b, g.Created)
	b = binary.AppendUvarint(b, g.Gen)
	return binary.AppendUvarint(b, g.Base)
}

// lead is written by a bridge that took the lead, before its first ops.
type lead struct {
	Node        string
	Fingerprint string // of the engine configuration (EngineFingerprint)
}

func (l lead) encode() []byte {
	b := []byte{version, kindLead}
	b = appendString(b, l.Node)
	return appendString(b, l.Fingerprint)
}

// decodeControl decodes a genesis or lead message (and names the kind of
// any other: decodeStall reads a stall marker).
func decodeControl(data []byte) (kind byte, g genesis, l lead, err error) {
	d := decoder{b: data}
	kind = d.header()
	switch kind {
	case kindGenesis:
		g.ID = d.string()
		g.Created = d.varint()
		g.Gen, g.Base = 1, 0
		if len(d.b) > 0 { // written before rollovers: the first generation
			g.Gen, g.Base = d.uvarint(), d.uvarint()
		}
	case kindLead:
		l.Node = d.string()
		l.Fingerprint = d.string()
	case kindOps, kindStall:
	default:
		d.fail("unknown kind %d", kind)
	}
	return kind, g, l, d.err
}
