package ws

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/gorilla/websocket"
)

// Client is a Go client of the /ws protocol (docs/websocket.md), used by
// the tests and the load tool. One goroutine may read (Next, ReadRaw) while
// another writes (Subscribe, Resume, Auth, Ping, Close).
type Client struct {
	c   *websocket.Conn
	buf []byte // ReadRaw's buffer
}

// Dial connects to url (ws://host:port/ws). A non-empty token goes in the
// Authorization header; with "" the caller must send Auth within the
// server's auth timeout.
func Dial(ctx context.Context, url, token string) (*Client, error) {
	hdr := http.Header{}
	if token != "" {
		hdr.Set("Authorization", "Bearer "+token)
	}
	d := websocket.Dialer{HandshakeTimeout: 30 * time.Second}
	c, resp, err := d.DialContext(ctx, url, hdr)
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("ws: dial %s: %w (HTTP %d)", url, err, resp.StatusCode)
		}
		return nil, fmt.Errorf("ws: dial %s: %w", url, err)
	}
	return &Client{c: c}, nil
}

// Message is one server message; only the fields of its op are set.
type Message struct {
	Op string `json:"op"` // hello, snapshot, resumed, event, pong, renewed

	Seq  uint64          `json:"seq"`  // snapshot, event: feed seq; resumed: last seq replayed
	Type string          `json:"type"` // event: extenUpdate, queueUpdate, ...
	At   int64           `json:"at"`   // event: ms since the epoch when the engine published it
	Data json.RawMessage `json:"data"` // event: the entity's JSON

	Version   uint64          `json:"version"`   // hello: protocol version (1); snapshot: state version
	Epoch     string          `json:"epoch"`     // hello, snapshot: pass back to Resume
	ExpiresAt int64           `json:"expiresAt"` // hello, renewed: token expiry, ms since the epoch
	User      json.RawMessage `json:"user"`      // hello

	Stale      bool            `json:"stale"` // snapshot: the PBX link is not live
	PBX        json.RawMessage `json:"pbx"`   // snapshot: {"pbx":"live|resyncing|stalled|down","version":N,"since":ms}
	Extensions json.RawMessage `json:"extensions"`
	Queues     json.RawMessage `json:"queues"`
	Parkings   json.RawMessage `json:"parkings"`
	Trunks     json.RawMessage `json:"trunks"`
	Me         json.RawMessage `json:"me"`

	Since uint64 `json:"since"` // resumed: the seq the replay starts after
}

// Next reads and decodes the next message. When the server closes the
// connection the error carries its close code (CloseCode).
func (c *Client) Next(ctx context.Context) (Message, error) {
	var m Message
	if ctx.Done() != nil {
		stop := context.AfterFunc(ctx, func() { c.c.SetReadDeadline(time.Unix(1, 0)) })
		defer stop()
	}
	b, err := c.ReadRaw()
	if err != nil {
		if ctx.Err() != nil {
			return m, ctx.Err()
		}
		return m, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("ws: bad message %q: %w", b, err)
	}
	return m, nil
}

// ReadRaw returns the next text message as it came; the bytes are valid
// until the next call. It allocates nothing once its buffer has grown.
func (c *Client) ReadRaw() ([]byte, error) {
	for {
		typ, r, err := c.c.NextReader()
		if err != nil {
			return nil, err
		}
		if typ != websocket.TextMessage {
			continue
		}
		b := c.buf[:0]
		for {
			if len(b) == cap(b) {
				b = append(b, 0)[:len(b)]
			}
			n, err := r.Read(b[len(b):cap(b)])
			b = b[:len(b)+n]
			if err == io.EOF {
				c.buf = b
				return b, nil
			}
			if err != nil {
				return nil, err
			}
		}
	}
}

// SetReadDeadline bounds the next reads.
func (c *Client) SetReadDeadline(t time.Time) error { return c.c.SetReadDeadline(t) }

func (c *Client) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return c.c.WriteMessage(websocket.TextMessage, b)
}

// Subscribe asks for a snapshot of the topics ("extensions", "queues",
// "parkings", "trunks", "me") and the events that follow.
func (c *Client) Subscribe(topics ...string) error {
	return c.send(map[string]any{"op": "subscribe", "topics": topics})
}

// SubscribePBXs is Subscribe limited to some PBXs ("default" for the PBX
// of --ami), when several are followed.
func (c *Client) SubscribePBXs(pbxs []string, topics ...string) error {
	return c.send(map[string]any{"op": "subscribe", "topics": topics, "pbxs": pbxs})
}

// Resume subscribes asking for the events after seq since (the last one
// applied) of the server epoch epoch; the server replays them after a
// "resumed" message, or sends a snapshot when it no longer can.
func (c *Client) Resume(epoch string, since uint64, topics ...string) error {
	return c.send(map[string]any{"op": "subscribe", "topics": topics, "since": since, "epoch": epoch})
}

// Sub is a subscribe message (docs/websocket.md "Subscribing").
type Sub struct {
	Topics []string `json:"topics"`
	PBXs   []string `json:"pbxs,omitempty"`
	// Since and Epoch resume (Resume); Since nil: a snapshot.
	Since *uint64 `json:"since,omitempty"`
	Epoch string  `json:"epoch,omitempty"`
	// Deltas lists the topics whose changes come as what changed:
	// "trunks" brings trunkConversations events instead of trunkUpdate,
	// "queues" queueMembers instead of queueUpdate; "status", the node's
	// own say (a bus node that cannot hear its
	// stream, and hears it again) as a pbxStatus at the last seq sent
	// instead of a snapshot.
	Deltas []string `json:"deltas,omitempty"`
}

// SubscribeWith sends subscribe message s.
func (c *Client) SubscribeWith(s Sub) error {
	return c.send(struct {
		Op string `json:"op"`
		Sub
	}{"subscribe", s})
}

// Auth authenticates a connection dialled without a token, or renews the
// token of an authenticated one.
func (c *Client) Auth(token string) error {
	return c.send(map[string]string{"op": "auth", "token": token})
}

// Ping sends {"op":"ping"}; the server answers {"op":"pong"}.
func (c *Client) Ping() error { return c.send(map[string]string{"op": "ping"}) }

// Send writes any message as JSON (for tests of the protocol's errors).
func (c *Client) Send(v any) error { return c.send(v) }

// Close sends a normal close and closes the connection.
func (c *Client) Close() error {
	c.c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	return c.c.Close()
}

// CloseCode is the close code the server sent, when err (from Next or
// ReadRaw) reports a close frame; 0 otherwise.
func CloseCode(err error) int {
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		return ce.Code
	}
	return 0
}

// WriteRaw sends b as one text message, as it is (the load tool's floods).
func (c *Client) WriteRaw(b []byte) error { return c.c.WriteMessage(websocket.TextMessage, b) }
