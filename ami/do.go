package ami

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Do sends action and waits for its answer. It sets a unique ActionID unless
// the action has one; for list actions it waits for the whole list (see
// Response). Errors: *ActionError when Asterisk answered "Response: Error"
// (the Response is returned too), ErrNotConnected, ErrConnectionLost, a
// timeout (IsTimeout) when ctx ends or, if ctx has no deadline, after
// Config.ActionTimeout, or a *HeaderError when a header holds CR, LF or NUL
// (nothing is written then). Safe for concurrent use; concurrent calls are
// pipelined on the one connection.
func (c *Client) Do(ctx context.Context, action Message) (Response, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.cfg.ActionTimeout)
		defer cancel()
	}
	if err := action.Validate(); err != nil {
		return Response{}, fmt.Errorf("ami: %s: %w", action.Action(), err)
	}
	c.mu.Lock()
	cn := c.cur
	c.mu.Unlock()
	if cn == nil {
		return Response{}, fmt.Errorf("ami: %s: %w", action.Action(), ErrNotConnected)
	}
	return c.do(ctx, cn, action)
}

func (c *Client) do(ctx context.Context, cn *conn, action Message) (Response, error) {
	name := action.Action()
	id := action.ActionID()
	if id == "" {
		id = c.nextID()
		action = action.Add("ActionID", id)
	}
	cl := &call{name: name, ch: make(chan struct{})}
	cn.mu.Lock()
	if cn.err != nil {
		cn.mu.Unlock()
		return Response{}, fmt.Errorf("ami: %s: %w", name, ErrConnectionLost)
	}
	if _, dup := cn.pending[id]; dup {
		cn.mu.Unlock()
		return Response{}, fmt.Errorf("ami: %s: ActionID %q already in flight", name, id)
	}
	cn.pending[id] = cl
	cn.mu.Unlock()
	forget := func() {
		cn.mu.Lock()
		if cn.pending[id] == cl {
			delete(cn.pending, id)
		}
		cn.mu.Unlock()
	}

	if err := c.write(cn, action); err != nil {
		forget()
		var he *HeaderError
		if errors.As(err, &he) {
			return Response{}, fmt.Errorf("ami: %s: %w", name, err)
		}
		cn.fail(err)
		return Response{}, fmt.Errorf("ami: %s: %w: %w", name, ErrConnectionLost, err)
	}
	select {
	case <-cl.ch:
	case <-cn.done:
		forget()
		// The answer may have arrived just before the connection ended.
		select {
		case <-cl.ch:
		default:
			return Response{}, fmt.Errorf("ami: %s: %w", name, ErrConnectionLost)
		}
	case <-ctx.Done():
		forget()
		return Response{}, fmt.Errorf("ami: %s: %w", name, ctx.Err())
	}
	resp := cl.resp
	if strings.EqualFold(resp.Response(), "Error") {
		return resp, &ActionError{Action: name, Message: resp.Get("Message")}
	}
	return resp, nil
}
