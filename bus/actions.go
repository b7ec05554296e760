package bus

import (
	"context"
	"encoding/binary"
	"errors"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ctibridge/ctibridge/ami"
)

// Actions travel from any node to the leader by NATS request/reply on
// ctibridge.<pbx>.action: the permission checks are made where the user
// is (rest, on the node that took the request), the AMI validation where
// the link is (ami.Client.Do). Refreshes (link.Refresh after an action
// that changes AstDB) are published on ctibridge.<pbx>.refresh.

// Reply status bytes.
const (
	replyOK           = 0 // response message, items
	replyActionError  = 1 // action, message: *ami.ActionError
	replyNotConnected = 2 // ami.ErrNotConnected
	replyTimeout      = 3 // the PBX did not answer in time
	replyLost         = 4 // ami.ErrConnectionLost
	replyInjection    = 5 // ami.ErrInjection
	replyOther        = 6 // text
	replyStaleLease   = 7 // ErrStaleLease: the leader's lease ran out, nothing sent
)

// maxInFlight bounds the actions a leader runs at once for other nodes.
const maxInFlight = 256

// errLeaderTimeout is what a timeout of the PBX reported by the leader
// becomes on the asking node: a timeout (ami.IsTimeout).
var errLeaderTimeout = context.DeadlineExceeded

// Do sends an action to the PBX: directly while this node leads, else to
// the leader over NATS. With no leader it fails with ami.ErrNotConnected
// (REST's 503 pbx_down), and the errors of the leader's AMI client come
// back as the same errors (REST maps them as for a local link).
func (n *Node) Do(ctx context.Context, a ami.Message) (ami.Response, error) {
	if n.leading.Load() || n.fenced.Load() {
		// Stamped now, checked before it is written (fence.go): a
		// node whose lease ran out refuses, it forwards nothing over
		// the NATS it cannot reach.
		return n.act(ctx, n.term(), a)
	}
	if err := a.Validate(); err != nil {
		return ami.Response{}, err
	}
	req := []byte{version}
	wait := time.Duration(0)
	if d, ok := ctx.Deadline(); ok {
		wait = time.Until(d)
	}
	req = binary.AppendVarint(req, wait.Milliseconds())
	req = appendMessage(req, a)
	m, err := n.nc.RequestWithContext(ctx, "ctibridge."+n.cfg.PBX+".action", req)
	switch {
	case errors.Is(err, nats.ErrNoResponders), errors.Is(err, nats.ErrConnectionClosed):
		return ami.Response{}, ami.ErrNotConnected
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		return ami.Response{}, context.DeadlineExceeded
	case err != nil:
		return ami.Response{}, err
	}
	return decodeReply(m.Data)
}

func decodeReply(data []byte) (ami.Response, error) {
	d := decoder{b: data}
	if v := d.byte(); d.err == nil && v != version {
		d.fail("reply version %d", v)
	}
	var resp ami.Response
	var err error
	switch st := d.byte(); st {
	case replyOK:
		resp.Message = d.message()
		resp.Items = d.messages()
	case replyActionError:
		a := d.string()
		err = &ami.ActionError{Action: a, Message: d.string()}
	case replyNotConnected:
		err = ami.ErrNotConnected
	case replyTimeout:
		err = errLeaderTimeout
	case replyLost:
		err = ami.ErrConnectionLost
	case replyInjection:
		err = ami.ErrInjection
	case replyOther:
		err = errors.New(d.string())
	case replyStaleLease:
		err = ErrStaleLease
	default:
		d.fail("reply status %d", st)
	}
	if d.err != nil {
		return ami.Response{}, d.err
	}
	return resp, err
}

func encodeReply(resp ami.Response, err error) []byte {
	b := []byte{version}
	var ae *ami.ActionError
	switch {
	case err == nil:
		b = append(b, replyOK)
		b = appendMessage(b, resp.Message)
		return appendMessages(b, resp.Items)
	case errors.As(err, &ae):
		b = append(b, replyActionError)
		b = appendString(b, ae.Action)
		return appendString(b, ae.Message)
	case errors.Is(err, ami.ErrNotConnected):
		return append(b, replyNotConnected)
	case ami.IsTimeout(err):
		return append(b, replyTimeout)
	case errors.Is(err, ami.ErrConnectionLost):
		return append(b, replyLost)
	case errors.Is(err, ami.ErrInjection):
		return append(b, replyInjection)
	case errors.Is(err, ErrStaleLease):
		return append(b, replyStaleLease)
	}
	b = append(b, replyOther)
	return appendString(b, err.Error())
}

// serveActions subscribes the leader to the action and refresh subjects.
func (n *Node) serveActions() error {
	sem := make(chan struct{}, maxInFlight)
	act, err := n.nc.QueueSubscribe("ctibridge."+n.cfg.PBX+".action", "leader", func(m *nats.Msg) {
		select {
		case sem <- struct{}{}:
		default:
			m.Respond(encodeReply(ami.Response{}, errors.New("bus: the leader has too many actions in flight")))
			return
		}
		term := n.term() // the fencing token, when the action is taken
		go func() {
			defer func() { <-sem }()
			m.Respond(n.runAction(term, m.Data))
		}()
	})
	if err != nil {
		return err
	}
	ref, err := n.nc.Subscribe("ctibridge."+n.cfg.PBX+".refresh", func(m *nats.Msg) {
		d := decoder{b: m.Data}
		if d.byte() != version || d.err != nil {
			return
		}
		if acts := d.messages(); d.err == nil && n.cfg.Refresh != nil {
			n.cfg.Refresh(acts...)
		}
	})
	if err != nil {
		act.Unsubscribe()
		return err
	}
	// Run's end (a step-down) leaves the queue group at once: the
	// actions of other nodes go to the new leader.
	context.AfterFunc(n.ctx, func() {
		act.Unsubscribe()
		ref.Unsubscribe()
	})
	return nil
}

// runAction decodes a forwarded action, runs it on the AMI client if
// the fencing token term still holds, and encodes the outcome.
func (n *Node) runAction(term uint64, data []byte) []byte {
	d := decoder{b: data}
	if v := d.byte(); d.err == nil && v != version {
		d.fail("request version %d", v)
	}
	wait := time.Duration(d.varint()) * time.Millisecond
	a := d.message()
	if d.err != nil {
		return encodeReply(ami.Response{}, d.err)
	}
	if wait <= 0 || wait > time.Minute {
		wait = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	return encodeReply(n.act(ctx, term, a))
}

// Refresh asks the leader's link to re-read what actions changed in AstDB
// (rest.Refresher); on the leader it is the link's Refresh.
func (n *Node) Refresh(actions ...ami.Message) bool {
	if n.leading.Load() {
		return n.cfg.Refresh != nil && n.cfg.Refresh(actions...)
	}
	b := appendMessages([]byte{version}, actions)
	return n.nc.Publish("ctibridge."+n.cfg.PBX+".refresh", b) == nil
}
