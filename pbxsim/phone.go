package pbxsim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"
)

// PhoneConfig configures a Phone.
type PhoneConfig struct {
	// Exten is the extension (SIP user) of the phone. Required.
	Exten string
	// Server is the PBX's SIP address, host:port. Required.
	Server string
	// Name is the caller ID name sent in From (display name). Default "".
	Name string
	// Secret is the digest password, when the PBX asks for one.
	Secret string
	// Addr is the phone's own UDP address. Default 127.0.0.1:0.
	Addr string
	// RingTime is how long an incoming call rings before it is answered.
	// Default 0: answered right after the 180.
	RingTime time.Duration
	// Busy makes the phone refuse incoming calls with 486 Busy Here.
	Busy bool
	// NoAnswer makes incoming calls ring until cancelled.
	NoAnswer bool
	// HangupOnTransfer makes the phone hang up a call whose transfer
	// (Transfer) succeeded, on reading the NOTIFY "200 OK", as baresip and
	// desk phones do. It sends the BYE before answering the NOTIFY, the
	// hardest order for the PBX.
	HangupOnTransfer bool
	// UserAgent, when set, is the User-Agent of its REGISTER: the device
	// type the PBX reports (ContactStatus), which picks the auto-answer
	// header. Default none.
	UserAgent string
	// Log receives debug logs. Default: discard.
	Log *slog.Logger
}

// Phone is a SIP phone on sipgo for tests and demos: it registers, places
// calls and answers them. Methods are safe for concurrent use.
type Phone struct {
	cfg  PhoneConfig
	conn net.PacketConn
	ua   *sipgo.UserAgent
	srv  *sipgo.Server
	dua  *sipgo.DialogUA

	mu       sync.Mutex
	notifies []string // sipfrag bodies of the NOTIFYs received
	incoming map[string]*sipgo.DialogServerSession
	outgoing map[string]*sipgo.DialogClientSession
	calls    chan *PhoneCall
}

// PhoneCall is one established call of a Phone.
type PhoneCall struct {
	ph  *Phone
	srv *sipgo.DialogServerSession
	cli *sipgo.DialogClientSession
	id  string // key in Phone.outgoing
}

// NewPhone binds the phone's UDP socket.
func NewPhone(cfg PhoneConfig) (*Phone, error) {
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	conn, err := net.ListenPacket("udp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("pbxsim: phone: %w", err)
	}
	la := conn.LocalAddr().(*net.UDPAddr)
	var ph *Phone
	// A 2xx that reaches no transaction is acknowledged, and ended with BYE
	// when the phone had given the call up (ackStray2xx), as a phone must.
	stray := func(res *sip.Response) {
		if ph == nil {
			return
		}
		ackStray2xx(ph.dua.Client, res, func(id string) bool {
			ph.mu.Lock()
			defer ph.mu.Unlock()
			return ph.outgoing[id] != nil
		}, func(bye func()) { go bye() }, cfg.Log)
	}
	ua, err := sipgo.NewUA(sipgo.WithUserAgent("pbxsim-phone "+cfg.Exten), sipgo.WithUserAgentHostname(la.IP.String()),
		sipgo.WithUserAgentTransactionLayerOptions(sip.WithTransactionLayerUnhandledResponseHandler(stray)))
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("pbxsim: phone: %w", err)
	}
	srv, _ := sipgo.NewServer(ua, sipgo.WithServerLogger(cfg.Log))
	cli, _ := sipgo.NewClient(ua, sipgo.WithClientAddr(la.String()), sipgo.WithClientConnectionAddr(la.String()), sipgo.WithClientLogger(cfg.Log))
	ph = &Phone{cfg: cfg, conn: conn, ua: ua, srv: srv,
		dua:      &sipgo.DialogUA{Client: cli, ContactHDR: sip.ContactHeader{Address: sip.Uri{Scheme: "sip", User: cfg.Exten, Host: la.IP.String(), Port: la.Port}}},
		incoming: map[string]*sipgo.DialogServerSession{}, outgoing: map[string]*sipgo.DialogClientSession{},
		calls: make(chan *PhoneCall, 16)}
	srv.OnInvite(ph.onInvite)
	srv.OnAck(func(req *sip.Request, tx sip.ServerTransaction) {
		if s := ph.session(req); s != nil {
			s.ReadAck(req, tx)
		}
	})
	srv.OnBye(ph.onBye)
	srv.OnNotify(ph.onNotify)
	return ph, nil
}

// onNotify records a transfer's progress (a sipfrag) and, with
// HangupOnTransfer, hangs up the transferred call on its success.
func (ph *Phone) onNotify(req *sip.Request, tx sip.ServerTransaction) {
	frag := strings.TrimSpace(string(req.Body()))
	ph.mu.Lock()
	ph.notifies = append(ph.notifies, frag)
	ph.mu.Unlock()
	if ph.cfg.HangupOnTransfer && strings.HasPrefix(frag, "SIP/2.0 200") {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if s := ph.session(req); s != nil {
			s.Bye(ctx)
		} else if id, err := sip.DialogIDFromRequestUAS(req); err == nil {
			ph.mu.Lock()
			c := ph.outgoing[id]
			delete(ph.outgoing, id)
			ph.mu.Unlock()
			if c != nil {
				c.Bye(ctx)
			}
		}
		cancel()
	}
	tx.Respond(sip.NewResponseFromRequest(req, sip.StatusOK, "OK", nil))
}

// Addr is the phone's SIP address.
func (ph *Phone) Addr() string { return ph.conn.LocalAddr().String() }

// Answered delivers the incoming calls the phone answered.
func (ph *Phone) Answered() <-chan *PhoneCall { return ph.calls }

// Run serves incoming requests until ctx ends.
func (ph *Phone) Run(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		defer close(done)
		ph.srv.ServeUDP(ph.conn)
	}()
	<-ctx.Done()
	ph.conn.Close()
	<-done
	ph.ua.Close()
	return nil
}

func (ph *Phone) serverURI() sip.Uri {
	host, port, _ := net.SplitHostPort(ph.cfg.Server)
	n, _ := strconv.Atoi(port)
	return sip.Uri{Scheme: "sip", Host: host, Port: n}
}

// Register registers the phone's contact for expires (0: unregister).
// Run must have been started.
func (ph *Phone) Register(ctx context.Context, expires time.Duration) error {
	waitServing(ph.ua, ph.Addr())
	u := ph.serverURI()
	req := sip.NewRequest(sip.REGISTER, u)
	to := &sip.ToHeader{Address: sip.Uri{Scheme: "sip", User: ph.cfg.Exten, Host: u.Host, Port: u.Port}}
	from := &sip.FromHeader{Address: to.Address, Params: sip.NewParams()}
	from.Params.Add("tag", sip.GenerateTagN(10))
	req.AppendHeader(to)
	req.AppendHeader(from)
	req.AppendHeader(&ph.dua.ContactHDR)
	req.AppendHeader(sip.NewHeader("Expires", strconv.Itoa(int(expires/time.Second))))
	if ph.cfg.UserAgent != "" {
		req.AppendHeader(sip.NewHeader("User-Agent", ph.cfg.UserAgent))
	}
	res, err := ph.dua.Client.Do(ctx, req)
	if err == nil && res.StatusCode == sip.StatusUnauthorized && ph.cfg.Secret != "" {
		res, err = ph.dua.Client.DoDigestAuth(ctx, req, res, sipgo.DigestAuth{Username: ph.cfg.Exten, Password: ph.cfg.Secret})
	}
	if err != nil {
		return fmt.Errorf("pbxsim: phone %s: register: %w", ph.cfg.Exten, err)
	}
	if res.StatusCode != 200 {
		return fmt.Errorf("pbxsim: phone %s: register: %d %s", ph.cfg.Exten, res.StatusCode, res.Reason)
	}
	return nil
}

// ErrCallFailed wraps the final response of a call that was not answered.
var ErrCallFailed = errors.New("call failed")

// Call dials number and returns once it is answered. Cancelling ctx before
// then sends CANCEL.
func (ph *Phone) Call(ctx context.Context, number string) (*PhoneCall, error) {
	waitServing(ph.ua, ph.Addr())
	u := ph.serverURI()
	u.User = number
	from := &sip.FromHeader{DisplayName: ph.cfg.Name, Address: sip.Uri{Scheme: "sip", User: ph.cfg.Exten, Host: u.Host, Port: u.Port}, Params: sip.NewParams()}
	from.Params.Add("tag", sip.GenerateTagN(10))
	sess, err := ph.dua.Invite(ctx, u, ph.sdp(false), from, sip.NewHeader("Content-Type", "application/sdp"))
	if err != nil {
		return nil, fmt.Errorf("pbxsim: phone %s: invite: %w", ph.cfg.Exten, err)
	}
	err = sess.WaitAnswer(ctx, sipgo.AnswerOptions{Username: ph.cfg.Exten, Password: ph.cfg.Secret})
	if r := sess.InviteResponse; err != nil && r != nil && r.IsSuccess() {
		// Answered as the phone gave up (the 200 crossed its CANCEL):
		// acknowledge it and hang up (RFC 3261 §15).
		go func() {
			bctx, cancel := context.WithTimeout(context.Background(), 64*sip.T1)
			defer cancel()
			sess.Ack(bctx)
			sess.Bye(bctx)
		}()
	}
	if err != nil {
		var dr *sipgo.ErrDialogResponse
		if errors.As(err, &dr) {
			return nil, fmt.Errorf("pbxsim: phone %s: %w: %d %s", ph.cfg.Exten, ErrCallFailed, dr.Res.StatusCode, dr.Res.Reason)
		}
		return nil, fmt.Errorf("pbxsim: phone %s: call: %w", ph.cfg.Exten, err)
	}
	if err := sess.Ack(ctx); err != nil {
		return nil, fmt.Errorf("pbxsim: phone %s: ack: %w", ph.cfg.Exten, err)
	}
	id, _ := uacDialogID(sess.InviteResponse)
	ph.mu.Lock()
	ph.outgoing[id] = sess
	ph.mu.Unlock()
	return &PhoneCall{ph: ph, cli: sess, id: id}, nil
}

func (ph *Phone) sdp(hold bool) []byte {
	dir := "sendrecv"
	if hold {
		dir = "sendonly"
	}
	host, _, _ := net.SplitHostPort(ph.Addr())
	return fmt.Appendf(nil, "v=0\r\no=- 1 1 IN IP4 %s\r\ns=-\r\nc=IN IP4 %s\r\nt=0 0\r\nm=audio 6000 RTP/AVP 0\r\na=rtpmap:0 PCMU/8000\r\na=%s\r\n", host, host, dir)
}

func (ph *Phone) session(req *sip.Request) *sipgo.DialogServerSession {
	id, err := sip.DialogIDFromRequestUAS(req)
	if err != nil {
		return nil
	}
	ph.mu.Lock()
	defer ph.mu.Unlock()
	return ph.incoming[id]
}

func (ph *Phone) onInvite(req *sip.Request, tx sip.ServerTransaction) {
	if to := req.To(); to != nil && to.Params.Has("tag") {
		tx.Respond(sip.NewSDPResponseFromRequest(req, ph.sdp(false)))
		return
	}
	s, err := ph.dua.ReadInvite(req, tx)
	if err != nil {
		return
	}
	defer s.Close()
	if ph.cfg.Busy {
		s.Respond(486, "Busy Here", nil)
		return
	}
	// Told to auto-answer (autoanswer.go): no ring, the answer at once.
	if !autoAnswer(req) {
		s.Respond(180, "Ringing", nil)
		if ph.cfg.NoAnswer {
			<-s.Context().Done()
			return
		}
		select {
		case <-time.After(ph.cfg.RingTime):
		case <-s.Context().Done():
			return
		}
	}
	ph.mu.Lock()
	ph.incoming[s.ID] = s
	ph.mu.Unlock()
	if err := s.RespondSDP(ph.sdp(false)); err != nil {
		return
	}
	select {
	case ph.calls <- &PhoneCall{ph: ph, srv: s}:
	default:
	}
	<-s.Context().Done()
	ph.mu.Lock()
	delete(ph.incoming, s.ID)
	ph.mu.Unlock()
}

func (ph *Phone) onBye(req *sip.Request, tx sip.ServerTransaction) {
	if s := ph.session(req); s != nil {
		s.ReadBye(req, tx)
		return
	}
	id, _ := sip.DialogIDFromRequestUAS(req)
	ph.mu.Lock()
	c := ph.outgoing[id]
	delete(ph.outgoing, id)
	ph.mu.Unlock()
	if c != nil {
		c.ReadBye(req, tx)
		return
	}
	tx.Respond(sip.NewResponseFromRequest(req, sip.StatusCallTransactionDoesNotExists, "Call/Transaction Does Not Exist", nil))
}

// Hangup sends BYE.
func (c *PhoneCall) Hangup(ctx context.Context) error {
	if c.cli != nil {
		c.ph.mu.Lock()
		delete(c.ph.outgoing, c.id)
		c.ph.mu.Unlock()
		return c.cli.Bye(ctx)
	}
	return c.srv.Bye(ctx)
}

// Hold sends a re-INVITE putting the call on hold (sendonly) or taking it
// off hold (sendrecv). Only for calls this phone placed.
func (c *PhoneCall) Hold(ctx context.Context, hold bool) error {
	if c.cli == nil {
		return errors.New("pbxsim: phone: hold is only for outgoing calls")
	}
	req := sip.NewRequest(sip.INVITE, c.cli.InviteResponse.Contact().Address)
	req.SetBody(c.ph.sdp(hold))
	req.AppendHeader(sip.NewHeader("Content-Type", "application/sdp"))
	res, err := c.cli.Do(ctx, req)
	if err != nil {
		return err
	}
	if res.StatusCode != 200 {
		return fmt.Errorf("pbxsim: phone: re-INVITE: %d", res.StatusCode)
	}
	ack := sip.NewRequest(sip.ACK, req.Recipient)
	ack.AppendHeader(sip.HeaderClone(req.CSeq()))
	ack.CSeq().MethodName = sip.ACK
	return c.cli.WriteRequest(ack)
}

// Notifies returns the bodies (sipfrags) of the NOTIFYs received so far.
func (ph *Phone) Notifies() []string {
	ph.mu.Lock()
	defer ph.mu.Unlock()
	return append([]string(nil), ph.notifies...)
}

// Transfer sends REFER (a blind transfer of the other party to number)
// and returns the response's status code. The progress comes as NOTIFYs
// (Notifies).
func (c *PhoneCall) Transfer(ctx context.Context, number string) (int, error) {
	target := c.ph.serverURI()
	target.User = number
	var uri sip.Uri
	if c.cli != nil {
		uri = c.cli.InviteResponse.Contact().Address
	} else {
		uri = c.srv.InviteRequest.Contact().Address
	}
	req := sip.NewRequest(sip.REFER, uri)
	req.AppendHeader(sip.NewHeader("Refer-To", "<"+target.String()+">"))
	req.AppendHeader(sip.NewHeader("Referred-By", "<sip:"+c.ph.cfg.Exten+"@"+target.HostPort()+">"))
	req.AppendHeader(&c.ph.dua.ContactHDR)
	var res *sip.Response
	var err error
	if c.cli != nil {
		res, err = c.cli.Do(ctx, req)
	} else {
		res, err = c.srv.Do(ctx, req)
	}
	if err != nil {
		return 0, fmt.Errorf("pbxsim: phone %s: refer: %w", c.ph.cfg.Exten, err)
	}
	return res.StatusCode, nil
}

// Done is closed when the call has ended.
func (c *PhoneCall) Done() <-chan struct{} {
	if c.cli != nil {
		return c.cli.Context().Done()
	}
	return c.srv.Context().Done()
}
