// Package resttest builds a calls.Engine holding a synthetic PBX state
// by feeding it AMI events, for rest's tests and benchmarks and the lab's
// REST read bench (`ctibridge-lab restbench`): n
// extensions ("2000", "2001", ...), some of them in two-party calls, two
// queues with members and a waiting caller, a parking lot with one parked
// caller and a trunk with an inbound call.
package resttest

import (
	"fmt"
	"strconv"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
)

// Options says what to build.
type Options struct {
	Extensions int // how many extensions; default 100
	InCall     int // how many of them are in a call (rounded down to even); default 30
	Now        func() time.Time
}

// Exten is the number of the i-th extension.
func Exten(i int) string { return strconv.Itoa(2000 + i) }

// Chan is the channel of the i-th extension's call.
func Chan(i int) string { return fmt.Sprintf("PJSIP/%s-%08x", Exten(i), i) }

// TrunkChan is the trunk's channel, and TrunkCaller its caller's number.
const (
	TrunkChan   = "PJSIP/provider1-0000ffff"
	TrunkCaller = "0721405516"
	ParkedChan  = "PJSIP/provider1-0000fffe"
	ParkedNum   = "0612345678"
	QueueChan   = "PJSIP/provider1-0000fffd"
	QueueNum    = "0699999999"
)

func ev(name string, kv ...string) ami.Message {
	m := ami.NewMessage([]ami.Header{{Key: "Event", Value: name}}...)
	for i := 0; i+1 < len(kv); i += 2 {
		m = m.Add(kv[i], kv[i+1])
	}
	return m
}

func channelEv(name, ch, num, cname, connNum, connName, exten, uid, linked string, state int, extra ...string) ami.Message {
	desc := map[int]string{0: "Down", 4: "Ring", 5: "Ringing", 6: "Up"}[state]
	m := ev(name, "Channel", ch, "ChannelState", strconv.Itoa(state), "ChannelStateDesc", desc,
		"CallerIDNum", num, "CallerIDName", cname, "ConnectedLineNum", connNum, "ConnectedLineName", connName,
		"Language", "en", "AccountCode", "", "Context", "from-internal", "Exten", exten, "Priority", "1",
		"Uniqueid", uid, "Linkedid", linked)
	for i := 0; i+1 < len(extra); i += 2 {
		m = m.Add(extra[i], extra[i+1])
	}
	return m
}

// Events returns the AMI events that build the state.
func Events(o Options) []ami.Message {
	if o.Extensions <= 0 {
		o.Extensions = 100
	}
	if o.InCall < 0 || o.InCall > o.Extensions {
		o.InCall = o.Extensions
	}
	var out []ami.Message
	for i := range o.Extensions {
		x := Exten(i)
		out = append(out,
			ev(ami.EventExtensionStatus, "Exten", x, "Context", "from-internal", "Hint", "PJSIP/"+x, "Status", "0", "StatusText", "Idle"),
			ev(ami.EventContactStatus, "URI", "sip:"+x+"@10.0.0."+strconv.Itoa(i%250+1)+":5062", "ContactStatus", "Reachable",
				"AOR", x, "EndpointName", x, "UserAgent", "SIPp"),
		)
	}
	for i := 0; i+1 < o.InCall; i += 2 {
		a, b := Exten(i), Exten(i+1)
		ca, cb := Chan(i), Chan(i+1)
		ua, ub := "1796028439."+strconv.Itoa(i), "1796028439."+strconv.Itoa(i+1)
		na, nb := "User "+a, "User "+b
		br := "bridge-" + strconv.Itoa(i)
		out = append(out,
			channelEv(ami.EventNewchannel, ca, a, na, "<unknown>", "<unknown>", b, ua, ua, 4),
			channelEv(ami.EventNewchannel, cb, b, nb, "<unknown>", "<unknown>", "s", ub, ua, 0),
			channelEv(ami.EventDialBegin, ca, a, na, "<unknown>", "<unknown>", b, ua, ua, 4,
				"DestChannel", cb, "DestChannelState", "0", "DestCallerIDNum", b, "DestCallerIDName", nb,
				"DestConnectedLineNum", a, "DestConnectedLineName", na, "DestContext", "from-internal", "DestExten", b,
				"DestUniqueid", ub, "DestLinkedid", ua, "DialString", b),
			channelEv(ami.EventNewstate, cb, b, nb, a, na, b, ub, ua, 6),
			channelEv(ami.EventDialEnd, ca, a, na, b, nb, b, ua, ua, 4,
				"DestChannel", cb, "DestChannelState", "6", "DestCallerIDNum", b, "DestCallerIDName", nb,
				"DestUniqueid", ub, "DestLinkedid", ua, "DialStatus", "ANSWER"),
			channelEv(ami.EventNewstate, ca, a, na, b, nb, b, ua, ua, 6),
			ev(ami.EventBridgeCreate, "BridgeUniqueid", br, "BridgeType", "basic", "BridgeTechnology", "simple_bridge", "BridgeNumChannels", "0"),
			channelEv(ami.EventBridgeEnter, cb, b, nb, a, na, "", ub, ua, 6, "BridgeUniqueid", br, "BridgeNumChannels", "1"),
			channelEv(ami.EventBridgeEnter, ca, a, na, b, nb, b, ua, ua, 6, "BridgeUniqueid", br, "BridgeNumChannels", "2"),
			ev(ami.EventExtensionStatus, "Exten", a, "Context", "from-internal", "Hint", "PJSIP/"+a, "Status", "1", "StatusText", "InUse"),
			ev(ami.EventExtensionStatus, "Exten", b, "Context", "from-internal", "Hint", "PJSIP/"+b, "Status", "1", "StatusText", "InUse"),
		)
	}
	// A trunk with an inbound call ringing nobody yet, a queue caller and a
	// parked caller.
	out = append(out,
		ev(ami.EventContactStatus, "URI", "sip:provider1@198.51.100.1:5060", "ContactStatus", "Reachable", "AOR", "provider1", "EndpointName", "provider1"),
		channelEv(ami.EventNewchannel, TrunkChan, TrunkCaller, "ACME Spa", "<unknown>", "<unknown>", "0721000000", "1796028500.1", "1796028500.1", 4),
		channelEv(ami.EventNewchannel, QueueChan, QueueNum, "Caller Q", "<unknown>", "<unknown>", "401", "1796028500.2", "1796028500.2", 6),
		channelEv(ami.EventNewchannel, ParkedChan, ParkedNum, "Caller P", "<unknown>", "<unknown>", "700", "1796028500.3", "1796028500.3", 6),
	)
	for _, q := range []string{"401", "402"} {
		out = append(out, ev(ami.EventQueueParams, "Queue", q, "Max", "0", "Strategy", "ringall", "Calls", "0", "Holdtime", "12",
			"TalkTime", "95", "Completed", "7", "Abandoned", "1"))
		for i := 0; i < min(4, o.Extensions); i++ {
			x := Exten(i)
			out = append(out, ev(ami.EventQueueMember, "Queue", q, "MemberName", "User "+x, "Interface", "PJSIP/"+x,
				"StateInterface", "PJSIP/"+x, "Membership", "dynamic", "Penalty", "0", "CallsTaken", "3",
				"LastCall", "1796028000", "InCall", "0", "Status", "1", "Paused", "0", "PausedReason", ""))
		}
	}
	out = append(out,
		ev(ami.EventQueueCallerJoin, "Queue", "401", "Position", "1", "Count", "1", "Channel", QueueChan, "CallerIDNum", QueueNum,
			"CallerIDName", "Caller Q", "Uniqueid", "1796028500.2", "Linkedid", "1796028500.2"),
		ev(ami.EventParkinglot, "Name", "default", "StartSpace", "701", "StopSpace", "710", "Timeout", "45"),
		ev(ami.EventParkedCall, "ParkeeChannel", ParkedChan, "ParkeeCallerIDNum", ParkedNum, "ParkeeCallerIDName", "Caller P",
			"ParkeeUniqueid", "1796028500.3", "ParkingSpace", "701", "ParkingLot", "default", "ParkingTimeout", "45",
			"ParkingDuration", "3", "ParkerDialString", "PJSIP/"+Exten(0)),
	)
	return out
}

// Engine returns an engine that has applied Events(o), live and published.
func Engine(o Options) *calls.Engine {
	now := o.Now
	if now == nil {
		now = func() time.Time { return time.UnixMilli(1796028600000) }
	}
	e := calls.New(calls.Config{Now: now, Opaque: auth.Opaquer{}})
	e.SetLink(calls.LinkResyncing)
	e.BeginResync()
	for _, m := range Events(o) {
		e.Apply(m)
	}
	e.EndResync()
	e.Publish()
	return e
}

// Churn returns the i-th event of an endless stream that changes the state
// without growing it: an idle extension (past the ones in calls) toggles
// between idle and ringing.
func Churn(o Options, i int) ami.Message {
	if o.Extensions <= 0 {
		o.Extensions = 100
	}
	idle := max(1, o.Extensions-o.InCall)
	x := Exten(o.InCall + i%idle)
	if (i/idle)%2 == 0 {
		return ev(ami.EventExtensionStatus, "Exten", x, "Context", "from-internal", "Hint", "PJSIP/"+x, "Status", "8", "StatusText", "Ringing")
	}
	return ev(ami.EventExtensionStatus, "Exten", x, "Context", "from-internal", "Hint", "PJSIP/"+x, "Status", "0", "StatusText", "Idle")
}
