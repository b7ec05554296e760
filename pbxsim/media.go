package pbxsim

import (
	"bytes"
	"context"
	"strconv"

	"github.com/emiago/sipgo/sip"
)

// pbxsim sends and relays no RTP: the phones talk directly, each told the
// other's media description. When a channel already answered is bridged
// with a new party (the first leg of an Originate, a queue caller, the
// two sides of a completed attended transfer, a retrieved parked call, a
// transferee that redials), mediaTo re-INVITEs it with the new party's
// description, as a B2BUA with direct media does.

// mediaTo points ch's media at body, the description of the party it is
// now bridged with. Nothing when ch has no answered dialog, or already has
// body. p.mu held.
func (c *call) mediaTo(ch *channel, body []byte) {
	if len(body) == 0 || ch.gone || ch.byeSent || ch.byeRecv {
		return
	}
	offer := sdpWithOrigin(body, ch.sdpSent)
	if bytes.Equal(offer, ch.sdpSent) {
		return
	}
	ch.sdpSent = offer
	switch {
	case ch.srv != nil && ch.srvAnswered:
		srv := ch.srv
		uri := srv.InviteRequest.Contact().Address
		c.srvDo(ch, func(ctx context.Context) { reinvite(ctx, srv.Do, srv.WriteRequest, uri, offer) })
	case ch.cli != nil && ch.state == stateUp && ch.cli.InviteResponse != nil && ch.cli.InviteResponse.Contact() != nil:
		cli := ch.cli
		uri := cli.InviteResponse.Contact().Address
		c.goSIP(func(ctx context.Context) { reinvite(ctx, cli.Do, cli.WriteRequest, uri, offer) })
	}
}

// reinvite sends an in-dialog INVITE with body and acknowledges its 2xx.
func reinvite(ctx context.Context, do func(context.Context, *sip.Request) (*sip.Response, error),
	write func(*sip.Request) error, uri sip.Uri, body []byte) {
	req := sip.NewRequest(sip.INVITE, uri)
	req.SetBody(body)
	req.AppendHeader(sip.NewHeader("Content-Type", "application/sdp"))
	res, err := do(ctx, req)
	if err != nil || !res.IsSuccess() {
		return
	}
	ack := sip.NewRequest(sip.ACK, uri)
	cseq := *req.CSeq()
	cseq.MethodName = sip.ACK
	ack.AppendHeader(&cseq)
	write(ack)
}

// sdpWithOrigin is body under prev's origin (o=), its version one up,
// as an updated offer in prev's session must be (RFC 3264 §8). Without a
// usable prev, body as it is.
func sdpWithOrigin(body, prev []byte) []byte {
	var prevO []byte
	for line := range bytes.Lines(prev) {
		if bytes.HasPrefix(line, []byte("o=")) {
			prevO = bytes.TrimSpace(line)
		}
	}
	f := bytes.Fields(prevO)
	if len(f) != 6 {
		return body
	}
	v, err := strconv.ParseUint(string(f[2]), 10, 64)
	if err != nil {
		return body
	}
	f[2] = strconv.AppendUint(nil, v+1, 10)
	var out []byte
	for line := range bytes.Lines(body) {
		t := bytes.TrimSpace(line)
		if bytes.HasPrefix(t, []byte("o=")) {
			t = bytes.Join(f, []byte(" "))
		}
		out = append(out, t...)
		out = append(out, "\r\n"...)
	}
	return out
}
