package pbxsim

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/ami/amievent"
)

// originateReq is a parsed Originate action.
type originateReq struct {
	actionID        string
	endpoint        string // from Channel: PJSIP/<endpoint>
	context, exten  string
	app, data       string
	cidNum, cidName string
	account         string
	channelID       string       // ChannelId: the Uniqueid asked for
	headers         extraHeaders // PJSIP_HEADER(add,...) of its Variable lines
	async           bool         // the outcome goes out as OriginateResponse
	timeout         time.Duration
}

// parseCallerID splits `"Name" <num>`, `Name <num>` or `num`.
func parseCallerID(s string) (num, name string) {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '<'); i >= 0 && strings.HasSuffix(s, ">") {
		return s[i+1 : len(s)-1], strings.Trim(strings.TrimSpace(s[:i]), `"`)
	}
	return s, ""
}

// actOriginate really calls the first party (the Channel's contact) and,
// once it answers, runs Exten in Context (a Dial to the second party) or
// Application, as Asterisk does. With Async the response comes at once and
// the outcome later as OriginateResponse; without, the response waits for
// the outcome and no OriginateResponse is emitted (manager.c's
// action_originate).
func (p *PBX) actOriginate(_ context.Context, s *ami.Session, req ami.Message) []ami.Message {
	name, timeout := req.Get("Channel"), req.Get("Timeout")
	if name == "" {
		return errResp("Channel not specified")
	}
	ms, err := strconv.Atoi(timeout)
	if timeout != "" && err != nil {
		return errResp("Invalid timeout")
	}
	tech, ep, ok := strings.Cut(name, "/")
	if !ok {
		return errResp("Invalid channel")
	}
	if !strings.EqualFold(tech, "PJSIP") || ep == "" {
		return errResp("Originate failed") // pbxsim has PJSIP endpoints only
	}
	o := originateReq{actionID: req.Get("ActionID"), endpoint: ep, context: req.Get("Context"), exten: req.Get("Exten"),
		app: req.Get("Application"), data: req.Get("Data"), account: req.Get("Account"), timeout: 30 * time.Second,
		channelID: req.Get("ChannelId"), async: astTrue(req.Get("Async")), headers: originateHeaders(req)}
	if o.context == "" {
		o.context = p.cfg.Context
	}
	if o.exten == "" && o.app == "" {
		return errResp("Exten not specified")
	}
	o.cidNum, o.cidName = parseCallerID(req.Get("CallerID"))
	if ms > 0 {
		o.timeout = time.Duration(ms) * time.Millisecond
	}
	runCtx, ok := p.track()
	if !ok {
		return errResp("Originate failed")
	}
	queued := resp("Success", "Message", "Originate successfully queued")
	if o.async {
		// The answer goes before the call starts, so that it always
		// precedes the OriginateResponse, which carries the same ActionID.
		if id, ok := req.Lookup("ActionID"); ok {
			queued = queued.Insert(1, "ActionID", id)
		}
		s.Send(queued)
	}
	result := make(chan bool, 1)
	c := p.newCall()
	go func() {
		defer p.calls.Done()
		stop := context.AfterFunc(runCtx, c.cancel)
		defer stop()
		c.originate(o, result)
		c.finish()
	}()
	if o.async {
		return nil
	}
	select {
	case ok := <-result:
		if ok {
			return []ami.Message{queued}
		}
	case <-time.After(o.timeout + 5*time.Second):
	}
	return errResp("Originate failed")
}

func (c *call) originate(o originateReq, result chan<- bool) {
	p := c.p
	p.mu.Lock()
	p.stats.Calls++
	e := p.exts[o.endpoint]
	ch := p.newChannel(c, o.endpoint)
	ch.linkedid = ch.uniqueid
	ch.dialplan = true // once answered, it runs Exten or Application
	ch.exten, ch.context = "s", o.context
	ch.app, ch.appData = "AppDial2", "(Outgoing Line)"
	p.emit(chanEvent(ami.EventNewchannel, ch))
	p.setAccountCode(ch, o.account) // after the request, as pbx_outgoing_attempt does
	num := o.cidNum
	if num == "" {
		num = o.endpoint
	}
	ch.conNum, ch.conName = num, o.cidName
	p.emit(chanEvent(ami.EventNewConnectedLine, ch))
	p.emit(dialEvent(ami.EventDialBegin, nil, ch, "DialString", o.endpoint))
	respond := func(ok bool, reason int) {
		if o.async {
			p.emit(o.response(ok, reason, ch))
		}
		result <- ok
	}
	fail := func(cause, tech, reason int) {
		p.emit(dialEvent(ami.EventDialEnd, nil, ch, "DialStatus", dialStatus(cause)))
		c.hangupChannel(ch, cause, tech)
		respond(false, reason)
	}
	if e == nil || e.contact == nil {
		fail(20, 0, 0)
		p.mu.Unlock()
		return
	}
	ch.sipHeaders = o.headers
	c.invite(ch, *e.contact, num, o.cidName, p.sdp(p.chanSeq, false))
	p.mu.Unlock()

	timer := time.NewTimer(o.timeout)
	defer timer.Stop()
	for {
		select {
		case ev := <-c.events:
			if ev.ch != ch {
				continue
			}
			switch {
			case ev.kind == evResponse && ev.res.IsProvisional():
				c.originateRinging(ch)
			case ev.kind == evResponse:
				p.mu.Lock()
				ch.state = stateUp
				ch.answered = p.cfg.Now()
				ch.sdp = ev.res.Body()
				p.emit(chanEvent(ami.EventNewstate, ch))
				respond(true, 4)
				p.emit(dialEvent(ami.EventDialEnd, nil, ch, "DialStatus", "ANSWER"))
				p.updateDevice(ch.endpoint)
				if o.app == "" {
					ch.exten, ch.priority = o.exten, 1
				}
				p.mu.Unlock()
				c.originated(ch, o)
				return
			case ev.kind == evFail:
				cause, tech, reason := originateFailure(ev)
				p.mu.Lock()
				fail(cause, tech, reason)
				p.mu.Unlock()
				return
			case ev.kind == evHangup:
				p.mu.Lock()
				ch.cancelCli()
				p.mu.Unlock()
			}
		case <-timer.C:
			p.mu.Lock()
			ch.cancelCli()
			fail(19, 0, 3)
			p.mu.Unlock()
			return
		case <-c.ctx.Done():
			p.mu.Lock()
			ch.cancelCli()
			fail(16, 0, 0)
			p.mu.Unlock()
			return
		}
	}
}

// originateFailure is a refused first leg's hangup cause, the SIP code
// that refused it (0: none), and the Reason of OriginateResponse (5
// busy, 3 no answer, 0 other), as pbx_outgoing_attempt reports them.
func originateFailure(ev callEvent) (cause, tech, reason int) {
	cause = 127
	if ev.res != nil {
		tech = ev.res.StatusCode
		cause = sipToCause(tech)
	}
	switch cause {
	case 17:
		reason = 5
	case 18, 19:
		reason = 3
	}
	return cause, tech, reason
}

// originateRinging: the first party's phone rings.
func (c *call) originateRinging(ch *channel) {
	p := c.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if ch.state != stateRinging {
		ch.state = stateRinging
		p.emit(chanEvent(ami.EventNewstate, ch))
		p.updateDevice(ch.endpoint)
		p.emit(dialEvent(ami.EventDialState, nil, ch, "DialStatus", "RINGING"))
	}
}

// originated runs what the Originate asked for on its answered channel
// ch: Exten in Context, or Application.
func (c *call) originated(ch *channel, o originateReq) {
	switch {
	case strings.EqualFold(o.app, "PickupChan"):
		c.run2(c.pickup(ch, "", strings.SplitN(o.data, ",", 2)[0]))
	case strings.EqualFold(o.app, "Pickup"):
		ext, _, _ := strings.Cut(o.data, "@")
		c.run2(c.pickup(ch, ext, ""))
	case strings.EqualFold(o.app, "ChanSpy"):
		c.run2(c.chanSpy(ch, o.data))
	case o.app != "":
		c.run2(c.answerLocal(ch, o.exten)) // any other application: answered, waiting
	default:
		c.run(ch, o.exten)
	}
}

// response is the OriginateResponse of an async Originate, as
// manager.c's fast_originate writes it: a failure names the channel asked
// for and has no channel, so its Uniqueid is ChannelId or "<null>"; an
// Application originate reports Application and Data instead of Context
// and Exten.
func (o originateReq) response(ok bool, reason int, ch *channel) ami.Message {
	status, name, uid := "Success", ch.name, ch.uniqueid
	if !ok {
		status, name, uid = "Failure", "PJSIP/"+o.endpoint, o.channelID
		if uid == "" {
			uid = "<null>"
		}
	}
	hs := amievent.Head(ami.EventOriginateResponse, "call,all", 11)
	if o.actionID != "" {
		hs = append(hs, ami.Header{Key: "ActionID", Value: o.actionID})
	}
	hs = append(hs, ami.Header{Key: "Response", Value: status}, ami.Header{Key: "Channel", Value: name})
	if o.app != "" {
		hs = append(hs, ami.Header{Key: "Application", Value: o.app}, ami.Header{Key: "Data", Value: o.data})
	} else {
		hs = append(hs, ami.Header{Key: "Context", Value: o.context}, ami.Header{Key: "Exten", Value: o.exten})
	}
	hs = append(hs, ami.Header{Key: "Reason", Value: strconv.Itoa(reason)}, ami.Header{Key: "Uniqueid", Value: uid},
		ami.Header{Key: "CallerIDNum", Value: amievent.OrUnknown(o.cidNum)}, ami.Header{Key: "CallerIDName", Value: amievent.OrUnknown(o.cidName)})
	return ami.NewMessage(hs...)
}

// run2 continues run after a step that returned a redirect.
func (c *call) run2(a *channel, target string) {
	if a != nil {
		c.run(a, target)
	}
}

// astTrue is Asterisk's ast_true: yes, true, y, t, 1 or on.
func astTrue(s string) bool {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "yes", "true", "y", "t", "1", "on":
		return true
	}
	return false
}
