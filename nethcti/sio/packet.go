package sio

import (
	"encoding/json"
	"strconv"

	"github.com/zishang520/socket.io/servers/socket/v3"
	"github.com/zishang520/socket.io/v3/pkg/types"

	"github.com/ctibridge/ctibridge/calls"
)

// packet is one event encoded once for all its recipients, as the
// library's own broadcast does it: the socket.io packet (2["name",data]
// on the namespace "/") and, pre-encoded for the websocket transport, the
// engine.io message holding it ("4" before it).
type packet struct {
	name string
	data []byte // the event's JSON
	sio  types.BufferInterface
	opts *socket.WriteOptions
}

// newPacket encodes event name (one of ours: no escaping needed) with
// data, which must be JSON, or nil for an event with no argument.
func newPacket(name string, data []byte) *packet {
	b := make([]byte, 0, len(name)+len(data)+8)
	b = append(b, `42["`...)
	b = append(b, name...)
	b = append(b, '"')
	if data != nil {
		b = append(b, ',')
		b = append(b, data...)
	}
	b = append(b, ']')
	p := &packet{name: name, data: b[len(b)-1-len(data) : len(b)-1]}
	p.sio = types.NewStringBuffer(b[1:])
	p.opts = &socket.WriteOptions{PreEncoded: true}
	p.opts.WsPreEncodedFrame = newSharedFrame(b)
	return p
}

// newEventPacket is an event whose arguments are Go values (the replies
// to a login), as a test's sink sees it.
func newEventPacket(name string, args ...any) *packet {
	data := []byte("null")
	if len(args) > 0 {
		if b, err := json.Marshal(args[0]); err == nil {
			data = b
		}
	}
	return newPacket(name, data)
}

// write queues p for c. The socket.io packet is not cloned per socket
// (the library's WriteToEngine would): the transport writes the shared
// frame and never reads it (wsTransport). When the connection is open
// and its transport has nothing of the engine socket's waiting, the
// frame goes straight to the transport's write queue (wsTransport.direct):
// the engine socket's path (its packet, buffer, flush and events, then
// the transport's drain and ready events) cost as much CPU per recipient
// as the write itself. Otherwise it takes the engine socket's path,
// behind what waits there.
func (c *client) write(p *packet) {
	if c.sink != nil {
		c.sink(p)
		return
	}
	conn := c.sock.Conn()
	if t, ok := conn.Transport().(*wsTransport); ok && conn.ReadyState() == "open" && t.direct(p.opts.WsPreEncodedFrame.(*sharedFrame)) {
		return
	}
	conn.Write(p.sio, &p.opts.Options, nil)
}

// JSON shapes of the events made here rather than taken from the engine.
// hangupJSON is extenHangup's payload; cause "" leaves the field out.
func hangupJSON(exten, cause string) []byte {
	b := append([]byte(`{"callerNum":`), calls.AppendJSONString(nil, exten)...)
	b = append(b, `,"channelExten":`...)
	b = calls.AppendJSONString(b, exten)
	if cause != "" {
		b = append(b, `,"cause":`...)
		b = calls.AppendJSONString(b, cause)
	}
	return append(b, '}')
}

func connectedJSON(exten string) []byte {
	b := append([]byte(`{"extenConnected":`), calls.AppendJSONString(nil, exten)...)
	return append(b, '}')
}

func mainPresenceJSON(username, status string) []byte {
	b := append([]byte(`{"mainPresence":{"username":`), calls.AppendJSONString(nil, username)...)
	b = append(b, `,"status":`...)
	b = calls.AppendJSONString(b, status)
	return append(b, `}}`...)
}

func voicemailJSON(exten string, n int) []byte {
	b := append([]byte(`{"voicemail":`), calls.AppendJSONString(nil, exten)...)
	b = append(b, `,"counter":`...)
	b = strconv.AppendInt(b, int64(n), 10)
	return append(b, '}')
}

func confEndJSON(id string) []byte {
	b := append([]byte(`{"id":`), calls.AppendJSONString(nil, id)...)
	return append(b, '}')
}
