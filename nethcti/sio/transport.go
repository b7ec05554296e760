package sio

import (
	"errors"
	"io"
	"net"
	"sync"

	ws "github.com/gorilla/websocket"
	eio "github.com/zishang520/socket.io/parsers/engine/v3/packet"
	"github.com/zishang520/socket.io/servers/engine/v3/transports"
	"github.com/zishang520/socket.io/v3/pkg/queue"
	"github.com/zishang520/socket.io/v3/pkg/types"
)

// sharedFrame is an event's engine.io message as the fan-out hands it to
// every recipient, with the websocket frame made of it once for all of
// them (a gorilla PreparedMessage, safe to write to many connections).
type sharedFrame struct {
	*types.StringBuffer
	once sync.Once
	pm   *ws.PreparedMessage
	err  error
}

func newSharedFrame(b []byte) *sharedFrame {
	return &sharedFrame{StringBuffer: types.NewStringBuffer(b).(*types.StringBuffer)}
}

func (f *sharedFrame) prepared() (*ws.PreparedMessage, error) {
	f.once.Do(func() { f.pm, f.err = ws.NewPreparedMessage(ws.TextMessage, f.Bytes()) })
	return f.pm, f.err
}

// wsTransport is the library's websocket transport but for its writes.
// The library makes a PreparedMessage of a pre-encoded frame for each
// socket it writes it to (a frame built, and 12 KB allocated, per
// recipient); here a sharedFrame's is made once and written to all. Every
// write of the connection goes through Send and one queue, in order, as
// the library's do.
type wsTransport struct {
	transports.Websocket
	conn *types.WebSocketConn
	q    *queue.Queue
	mu   sync.Mutex // held by release while the transport turns writable and the socket flushes; by direct
}

// wsBuilder makes wsTransports: the server's only transport.
type wsBuilder struct{}

func (*wsBuilder) New(ctx *types.HttpContext) transports.Transport {
	w := &wsTransport{Websocket: transports.NewWebSocket(ctx), conn: ctx.Websocket, q: queue.New()}
	w.Prototype(w)
	return w
}

func (*wsBuilder) Name() string          { return transports.WEBSOCKET }
func (*wsBuilder) HandlesUpgrades() bool { return true }
func (*wsBuilder) UpgradesTo() []string  { return nil }

// Send queues packets for writing; the transport is not writable until
// they are written (then "drain", "ready"), as the library's Send.
func (w *wsTransport) Send(packets []*eio.Packet) {
	w.SetWritable(false)
	w.q.Enqueue(func() { w.send(packets) })
}

// release ends a Send as the library's transport does: "drain", then
// writable again and "ready", on which the engine socket hands what it
// buffered meanwhile to Send. direct waits out the last two steps (mu):
// between them the socket's buffer may hold packets.
func (w *wsTransport) release() {
	w.Emit("drain")
	w.mu.Lock()
	defer w.mu.Unlock()
	w.SetWritable(true)
	w.Emit("ready")
}

// direct queues an event's shared frame for writing, behind what the
// queue holds, if the transport is writable, and says whether it did.
// Outside release, a writable transport has nothing of the engine
// socket's waiting (the socket hands its buffer to Send as soon as the
// transport is writable, and Send makes it unwritable until written), so
// the frame is not written ahead of a packet the socket took before it.
// It leaves the writable state alone and emits nothing: the engine socket
// did not see the frame.
func (w *wsTransport) direct(f *sharedFrame) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.Writable() {
		return false
	}
	w.q.Enqueue(func() {
		pm, err := f.prepared()
		if err == nil {
			err = w.conn.WritePreparedMessage(pm)
		}
		if err != nil {
			w.fail(err)
		}
	})
	return true
}

func (w *wsTransport) send(packets []*eio.Packet) {
	defer w.release()
	for _, p := range packets {
		if err := w.write(p); err != nil {
			w.fail(err)
			return
		}
	}
}

func (w *wsTransport) write(p *eio.Packet) error {
	if p.Options != nil {
		if f, ok := p.Options.WsPreEncodedFrame.(*sharedFrame); ok {
			pm, err := f.prepared()
			if err != nil {
				return err
			}
			return w.conn.WritePreparedMessage(pm)
		}
	}
	data, err := w.Parser().EncodePacket(p, w.SupportsBinary())
	if err != nil {
		return err
	}
	mt := ws.BinaryMessage
	if _, ok := data.(*types.StringBuffer); ok {
		mt = ws.TextMessage
	}
	wr, err := w.conn.NextWriter(mt)
	if err != nil {
		return err
	}
	if _, err := io.Copy(wr, data); err != nil {
		wr.Close()
		return err
	}
	return wr.Close()
}

// fail reports a write's error to the connection as the library's
// transport does: a close, or an error.
func (w *wsTransport) fail(err error) {
	if ws.IsUnexpectedCloseError(err) || errors.Is(err, net.ErrClosed) {
		w.conn.Emit("close")
	} else {
		w.conn.Emit("error", err)
	}
}

// DoClose ends the queue with the transport.
func (w *wsTransport) DoClose(fn types.Callable) {
	w.q.TryClose()
	w.Websocket.DoClose(fn)
}
