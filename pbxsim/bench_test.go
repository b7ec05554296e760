package pbxsim

import (
	"context"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
)

// BenchmarkCallEvents measures building and broadcasting the AMI events
// of one answered call (Newchannel x2 through Hangup x2 and Cdr, about 25
// events) to one logged-in session.
func BenchmarkCallEvents(b *testing.B) {
	p := startPBX(b, Config{})
	startCapture(b, p.AMIAddr())
	c := p.newCall()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		p.mu.Lock()
		a := p.newChannel(c, "201")
		a.linkedid, a.state, a.exten = a.uniqueid, stateRing, "202"
		p.emit(chanEvent("Newchannel", a))
		bb := p.newChannel(c, "202")
		bb.linkedid, bb.exten = a.linkedid, "s"
		p.emit(chanEvent("Newchannel", bb))
		p.emit(chanEvent("NewConnectedLine", bb))
		p.emit(dialEvent("DialBegin", a, bb, "DialString", "202"))
		p.emit(chanEvent("NewConnectedLine", a))
		bb.state = stateRinging
		p.emit(chanEvent("Newstate", bb))
		p.emit(dialEvent("DialState", a, bb, "DialStatus", "RINGING"))
		bb.state, a.state = stateUp, stateUp
		p.emit(chanEvent("Newstate", bb))
		p.emit(dialEvent("DialEnd", a, bb, "DialStatus", "ANSWER"))
		p.emit(chanEvent("Newstate", a))
		br := &bridge{id: newBridgeID(), typ: "basic", tech: "simple_bridge"}
		p.emit(bridgeEvent("BridgeCreate", br, nil))
		c.enter(br, bb)
		c.enter(br, a)
		p.emit(chanEvent("HangupRequest", a, "Cause", "16"))
		c.leave(a)
		c.leave(bb)
		p.emit(bridgeEvent("BridgeDestroy", br, nil))
		p.emit(chanEvent("SoftHangupRequest", a, "Cause", "16"))
		c.hangupChannel(bb, 16, 0)
		p.emitCdr(a, "202", bb, "Dial", "PJSIP/202,15,tT", "ANSWERED")
		c.hangupChannel(a, 16, 0)
		p.mu.Unlock()
	}
	b.StopTimer()
	time.Sleep(10 * time.Millisecond)
}

// BenchmarkCoreShowChannels measures answering CoreShowChannels with 200
// live channels.
func BenchmarkCoreShowChannels(b *testing.B) {
	p := startPBX(b, Config{})
	c := p.newCall()
	p.mu.Lock()
	for range 200 {
		ch := p.newChannel(c, "201")
		ch.linkedid, ch.state = ch.uniqueid, stateUp
	}
	p.mu.Unlock()
	req := ami.NewAction("CoreShowChannels", "ActionID", "1")
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		p.actCoreShowChannels(context.Background(), nil, req)
	}
}
