package calls

import (
	"strings"

	"github.com/ctibridge/ctibridge/ami"
)

// Spy, whisper and barge sessions (app_chanspy). ChanSpy joins no bridge:
// the spied parties' conversations stay as they were, and the spy's own
// channel shows the spied extension as its counterpart.

// Spy marks the spy's own conversation.
type Spy struct {
	Exten string // the spied extension
	Mode  string // listen | whisper | barge
}

// spyMode reads ChanSpy's options ("<channel>,qEB" or just "qEw"): B
// barges (talks to both parties), w whispers (to the spied one), else the
// spy only listens.
func spyMode(data string) string {
	if i := strings.LastIndexByte(data, ','); i >= 0 {
		data = data[i+1:]
	}
	if j := strings.IndexByte(data, '('); j >= 0 {
		data = data[:j] // option arguments, as in g(grp)
	}
	switch {
	case strings.IndexByte(data, 'B') >= 0:
		return "barge"
	case strings.IndexByte(data, 'w') >= 0 || strings.IndexByte(data, 'W') >= 0:
		return "whisper"
	}
	return "listen"
}

// onSpyEvent handles ChanSpyStart, ChanSpyStop and OriginateResponse (ev).
func (e *Engine) onSpyEvent(m ami.Message, ev string) {
	if ev == ami.EventOriginateResponse {
		e.onOriginateResponse(m)
		return
	}
	start := ev == ami.EventChanSpyStart
	spyer := e.chanBy(m.Get("SpyerUniqueid"), m.Get("SpyerChannel"))
	if spyer == nil {
		e.stats.Unknown++
		return
	}
	e.changed(spyer)
	if !start {
		if spyer.m != nil {
			spyer.m.spyee = nil
		}
		return
	}
	spyee := e.chanBy(m.Get("SpyeeUniqueid"), m.Get("SpyeeChannel"))
	if spyee == nil || spyee == spyer {
		e.stats.Unknown++
		return
	}
	m2 := spyer.more()
	m2.spyee = spyee
	e.spiers[spyer] = struct{}{}
	if m2.spyMode == "" {
		m2.spyMode = "listen" // its Originate's options unknown (not ctibridge's, or before a restart)
	}
	if spyer.answeredAt == 0 {
		spyer.answeredAt = e.nowMs()
	}
}

// onOriginateResponse reads the spy mode off an Originate into ChanSpy.
func (e *Engine) onOriginateResponse(m ami.Message) {
	if !strings.EqualFold(m.Get("Application"), "ChanSpy") {
		return
	}
	if c := e.chanBy(m.Get("Uniqueid"), m.Get("Channel")); c != nil {
		c.more().spyMode = spyMode(m.Get("Data"))
		e.changed(c)
	}
}

// spyConv fills the spy's conversation: the spied party is the
// counterpart, never the spy's own number.
func (e *Engine) spyConv(cv *Conversation, ex *ConvExtra, c *channel) {
	t := c.m.spyee
	cv.Direction = "out"
	cv.Connected = alive(t)
	ex.Spy = Spy{Mode: c.m.spyMode}
	switch {
	case !alive(t):
		cv.Connected = false
	case t.kind == ownerExt:
		ex.Spy.Exten = t.owner
		cv.CounterpartNum = t.owner
		if x := e.exts[t.owner]; x != nil {
			cv.CounterpartName = x.displayName()
		}
	default:
		cv.CounterpartNum = t.callerNum
	}
	if cv.ID == c.name+">" || cv.ID == ">"+c.name || cv.ID == "" {
		cv.ID = c.name + ">" + t.name
	}
}
