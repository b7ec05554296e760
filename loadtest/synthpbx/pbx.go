package synthpbx

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/ami/amievent"
)

// PBX is the synthetic Asterisk's state: extensions 2000, 2001, ...
// (Exten), queues of some of them, the channels up, and each extension's
// hint state. Its methods emit the AMI events of what they do, in
// order, to the function given to New. It is not safe for concurrent
// use: its owner serialises the calls (and the reads of its lists).
type PBX struct {
	emit   func(ami.Message)
	exts   int
	epoch  int64
	now    func() time.Time
	seq    int              // channels created: names and Uniqueids
	chans  map[string]*Chan // up, by Uniqueid
	status []int            // ExtensionStatus of each extension (0 idle, 1 in use, 8 ringing, 16 hold)
	queues []*Queue
	events uint64
}

// Chan is one channel as CoreShowChannels lists it: the snapshot its
// events carry, and what the list adds.
type Chan struct {
	amievent.Channel
	App     string
	Bridge  string // "" when in none
	Seq     int
	Created time.Time
}

// Queue is a queue of the PBX: static members, ringall.
type Queue struct {
	Name, Number string
	Members      []int // extension indexes
	Completed    int
	Abandoned    int
	HoldTime     int // seconds, app_queue's running average
	TalkTime     int
	taken        map[int]int   // CallsTaken by member
	lastCall     map[int]int64 // Unix seconds
	Waiting      []*Chan       // callers waiting, in position order
}

// Exten is the number of extension i.
func Exten(i int) string { return strconv.Itoa(2000 + i) }

// New makes a PBX of exts extensions and queues queues ("q1" dialled as
// 601, ...), each with members static members, the first
// queues*members extensions in turn; events go to emit, and now is the
// PBX's clock (time.Now when nil).
func New(exts, queues, members int, emit func(ami.Message), now func() time.Time) (*PBX, error) {
	if exts < 2 {
		return nil, fmt.Errorf("synthpbx: %d extensions, want at least 2", exts)
	}
	if queues < 0 || members < 0 || queues*members > exts {
		return nil, fmt.Errorf("synthpbx: %d queues of %d members need %d extensions, have %d", queues, members, queues*members, exts)
	}
	if queues > 0 && members == 0 {
		return nil, fmt.Errorf("synthpbx: %d queues without members", queues)
	}
	if now == nil {
		now = time.Now
	}
	p := &PBX{emit: emit, exts: exts, epoch: now().Unix(), now: now, chans: map[string]*Chan{}, status: make([]int, exts)}
	for q := range queues {
		qu := &Queue{Name: "q" + strconv.Itoa(q+1), Number: strconv.Itoa(601 + q), taken: map[int]int{}, lastCall: map[int]int64{}}
		for m := range members {
			qu.Members = append(qu.Members, q*members+m)
		}
		p.queues = append(p.queues, qu)
	}
	return p, nil
}

// Events is how many events were emitted so far.
func (p *PBX) Events() uint64 { return p.events }

// Status is extension i's hint state (ExtensionStatus's Status).
func (p *PBX) Status(i int) int { return p.status[i] }

// Queues are the PBX's queues; the caller must not change them.
func (p *PBX) Queues() []*Queue { return p.queues }

// Chans are the channels up, in creation order.
func (p *PBX) Chans() []*Chan {
	out := make([]*Chan, 0, len(p.chans))
	for _, c := range p.chans {
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b *Chan) int { return a.Seq - b.Seq })
	return out
}

// newChan creates the next channel of endpoint ep (its name
// "PJSIP/<ep>-<seq>"), caller ID num, linked to linked (its own Uniqueid
// when empty), in context at exten.
func (p *PBX) newChan(ep, num, name, linked, context, exten string, state int) *Chan {
	return p.named(fmt.Sprintf("PJSIP/%s-%08x", ep, p.seq+1), num, name, linked, context, exten, state)
}

func (p *PBX) named(chName, num, name, linked, context, exten string, state int) *Chan {
	p.seq++
	uid := fmt.Sprintf("%d.%d", p.epoch, p.seq)
	if linked == "" {
		linked = uid
	}
	c := &Chan{Channel: amievent.Channel{Name: chName, UID: uid, Linked: linked, Num: num, CIDName: name, Context: context, Exten: exten,
		State: state, Priority: 1}, Seq: p.seq, Created: p.now()}
	p.chans[uid] = c
	return c
}

// chanEv emits a call event about c: its snapshot, then kv.
func (p *PBX) chanEv(name string, c *Chan, kv ...string) {
	p.send(amievent.ChannelEvent(name, &c.Channel, kv...))
}

// dialplanEv emits a dialplan event (Newexten, VarSet) about c.
func (p *PBX) dialplanEv(name string, c *Chan, kv ...string) {
	p.pairEv(name, "dialplan,all", nil, "", c, kv...)
}

// cidPres is a NewCallerid's CID-CallingPres, as recorded.
const cidPres = "0 (Presentation Allowed, Not Screened)"

// pairEv emits an event about two channels (AgentCalled,
// QueueCallerJoin, ...): the first's snapshot (left out when nil), the
// second's prefixed, then kv.
func (p *PBX) pairEv(name, priv string, c *Chan, prefix string, d *Chan, kv ...string) {
	var cs *amievent.Channel
	if c != nil {
		cs = &c.Channel
	}
	p.send(amievent.PairEvent(name, priv, cs, prefix, &d.Channel, kv...))
}

// dialEv emits a DialBegin, DialState or DialEnd of src (nil: a Local
// half dialled by no channel) dialling dst.
func (p *PBX) dialEv(name string, src, dst *Chan, kv ...string) {
	p.pairEv(name, "call,all", src, "Dest", dst, kv...)
}

// ev emits an event of kv only.
func (p *PBX) ev(name, priv string, kv ...string) {
	p.send(ami.NewMessage(amievent.AppendPairs(amievent.Head(name, priv, 2+len(kv)/2), kv...)...))
}

func (p *PBX) send(m ami.Message) {
	p.events++
	p.emit(m)
}

var statusText = map[int]string{0: "Idle", 1: "InUse", 8: "Ringing", 9: "InUse&Ringing", 16: "Hold"}

// setStatus changes extension i's hint state and says so.
func (p *PBX) setStatus(i, st int) {
	if p.status[i] == st {
		return
	}
	p.status[i] = st
	p.send(ami.NewMessage(p.StatusHeaders(ami.EventExtensionStatus, i, true)...))
}

// StatusHeaders are an ExtensionStatus of extension i (an
// ExtensionStateList item without Privilege when live is false).
func (p *PBX) StatusHeaders(event string, i int, live bool) []ami.Header {
	x := Exten(i)
	hs := make([]ami.Header, 0, 7)
	hs = append(hs, ami.Header{Key: "Event", Value: event})
	if live {
		hs = append(hs, ami.Header{Key: "Privilege", Value: "call,all"})
	}
	return append(hs, ami.Header{Key: "Exten", Value: x}, ami.Header{Key: "Context", Value: "from-internal"},
		ami.Header{Key: "Hint", Value: "PJSIP/" + x}, ami.Header{Key: "Status", Value: strconv.Itoa(p.status[i])},
		ami.Header{Key: "StatusText", Value: statusText[p.status[i]]})
}

// Announce emits what a bridge that did not resynchronise needs to know
// the PBX: every extension's hint state, its contact reachable and its
// endpoint's name (as a resync's PJSIPShowEndpoint follow-ups say), and
// every queue member's state.
func (p *PBX) Announce() {
	for i := range p.exts {
		x := Exten(i)
		p.send(ami.NewMessage(p.StatusHeaders(ami.EventExtensionStatus, i, true)...))
		p.ev(ami.EventContactStatus, "system,all", "URI", "sip:"+x+"@127.0.0.1:5062", "ContactStatus", "Reachable", "AOR", x,
			"EndpointName", x, "RoundtripUsec", "0")
		p.ev(ami.EventEndpointDetail, "call,all", "ObjectType", "endpoint", "ObjectName", x, "Context", "from-internal",
			"Callerid", `"User `+x+`" <`+x+`>`, "DeviceState", "Not in use")
	}
	for _, q := range p.queues {
		for _, m := range q.Members {
			p.memberStatus(q, m, ami.EventQueueMemberStatus, true)
		}
	}
}

// memberState is app_queue's device state of a member: 1 not in use, 2
// in use, 6 ringing.
func (p *PBX) memberState(m int) int {
	switch p.status[m] {
	case 0:
		return 1
	case 8:
		return 6
	}
	return 2
}

// memberStatus emits a QueueMemberStatus (or, live false, a QueueMember
// list item) of member m of q.
func (p *PBX) memberStatus(q *Queue, m int, event string, live bool) {
	p.send(ami.NewMessage(p.MemberHeaders(q, m, event, live)...))
}

// MemberHeaders are member m of q as QueueMemberStatus says it (a
// QueueStatus item, live false, has no Privilege and names the member's
// interface Location).
func (p *PBX) MemberHeaders(q *Queue, m int, event string, live bool) []ami.Header {
	x := Exten(m)
	hs := make([]ami.Header, 0, 20)
	hs = append(hs, ami.Header{Key: "Event", Value: event})
	if live {
		hs = append(hs, ami.Header{Key: "Privilege", Value: "agent,all"}, ami.Header{Key: "Queue", Value: q.Name},
			ami.Header{Key: "MemberName", Value: "User " + x}, ami.Header{Key: "Interface", Value: "PJSIP/" + x})
	} else {
		hs = append(hs, ami.Header{Key: "Queue", Value: q.Name}, ami.Header{Key: "Name", Value: "User " + x},
			ami.Header{Key: "Location", Value: "PJSIP/" + x})
	}
	return amievent.AppendPairs(hs, "StateInterface", "PJSIP/"+x, "Membership", "static", "Penalty", "0",
		"CallsTaken", strconv.Itoa(q.taken[m]), "LastCall", strconv.FormatInt(q.lastCall[m], 10), "LastPause", "0",
		"LoginTime", strconv.FormatInt(p.epoch, 10), "InCall", inCall(p.status[m]), "Status", strconv.Itoa(p.memberState(m)),
		"Paused", "0", "PausedReason", "", "Ringinuse", "0", "Wrapuptime", "0")
}

func inCall(st int) string {
	if st == 1 || st == 16 {
		return "1"
	}
	return "0"
}

// queueOf is the queue extension i is a member of, or nil.
func (p *PBX) queueOf(i int) *Queue {
	for _, q := range p.queues {
		if len(q.Members) > 0 && i >= q.Members[0] && i <= q.Members[len(q.Members)-1] {
			return q
		}
	}
	return nil
}

// setAgent changes member m's hint state and says so twice, as
// Asterisk does: ExtensionStatus and QueueMemberStatus.
func (p *PBX) setAgent(q *Queue, m, st int) {
	if p.status[m] == st {
		return
	}
	p.setStatus(m, st)
	p.memberStatus(q, m, ami.EventQueueMemberStatus, true)
}

// hangup emits c's Hangup with cause and forgets it.
func (p *PBX) hangup(c *Chan, cause, text string) {
	p.chanEv(ami.EventHangup, c, "Cause", cause, "Cause-txt", text)
	delete(p.chans, c.UID)
}
