package calls

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/loadtest/synthpbx"
)

// scalePBX generates the AMI events of a busy call centre: extensions
// 2000, 2001, ... registered, and two-party internal calls between them
// that start (Newchannel, DialBegin, ringing, answer, bridge) and end
// (bridge leave, hangup), with the noise Asterisk sends around them.
type scalePBX struct {
	exts int
	free []int      // idle extensions, oldest first
	up   [][2]int   // calls up, oldest first
	ids  []scaleIDs // per call in up
	next int        // call counter: channel names and Uniqueids
}

type scaleIDs struct{ ca, cb, ua, ub, br string }

func newScalePBX(exts int) *scalePBX {
	s := &scalePBX{exts: exts}
	for i := range exts {
		s.free = append(s.free, i)
	}
	return s
}

func scaleEv(name string, kv ...string) ami.Message {
	h := make([]ami.Header, 0, 1+len(kv)/2)
	h = append(h, ami.Header{Key: "Event", Value: name})
	for i := 0; i+1 < len(kv); i += 2 {
		h = append(h, ami.Header{Key: kv[i], Value: kv[i+1]})
	}
	return ami.NewMessage(h...)
}

func scaleChanEv(name, ch, num, conn, exten, uid, linked string, state int, extra ...string) ami.Message {
	kv := []string{"Channel", ch, "ChannelState", strconv.Itoa(state), "CallerIDNum", num, "CallerIDName", "User " + num,
		"ConnectedLineNum", conn, "ConnectedLineName", "<unknown>", "Language", "en", "AccountCode", "",
		"Context", "from-internal", "Exten", exten, "Priority", "1", "Uniqueid", uid, "Linkedid", linked}
	return scaleEv(name, append(kv, extra...)...)
}

func scaleExten(i int) string { return strconv.Itoa(2000 + i) }

// register returns the events that make every extension known, named and
// idle, as a resync and its PJSIPShowEndpoint follow-ups do.
func (s *scalePBX) register() []ami.Message {
	var out []ami.Message
	for i := range s.exts {
		x := scaleExten(i)
		out = append(out,
			scaleEv("ExtensionStatus", "Exten", x, "Context", "from-internal", "Hint", "PJSIP/"+x, "Status", "0", "StatusText", "Idle"),
			scaleEv("ContactStatus", "URI", "sip:"+x+"@10.0.0.1:5062", "ContactStatus", "Reachable", "AOR", x, "EndpointName", x),
			scaleEv("EndpointDetail", "ObjectType", "endpoint", "ObjectName", x, "Context", "from-internal",
				"Callerid", `"User `+x+`" <`+x+`>`, "DeviceState", "Not in use"),
		)
	}
	return out
}

// start returns the events of one call between the two oldest idle
// extensions, from the INVITE to both parties bridged.
func (s *scalePBX) start() []ami.Message {
	i, j := s.free[0], s.free[1]
	s.free = s.free[2:]
	s.next++
	n := strconv.Itoa(s.next)
	a, b := scaleExten(i), scaleExten(j)
	id := scaleIDs{
		ca: "PJSIP/" + a + "-" + n + "a", cb: "PJSIP/" + b + "-" + n + "b",
		ua: "1796028439." + n + "1", ub: "1796028439." + n + "2", br: "bridge-" + n,
	}
	s.up, s.ids = append(s.up, [2]int{i, j}), append(s.ids, id)
	return append([]ami.Message(nil),
		scaleChanEv("Newchannel", id.ca, a, "<unknown>", b, id.ua, id.ua, 4),
		scaleChanEv("VarSet", id.ca, a, "<unknown>", b, id.ua, id.ua, 4, "Variable", "SIPCALLID", "Value", n),
		scaleChanEv("Newexten", id.ca, a, "<unknown>", b, id.ua, id.ua, 4, "Application", "Dial"),
		scaleChanEv("Newchannel", id.cb, b, "<unknown>", "s", id.ub, id.ua, 0),
		scaleChanEv("DialBegin", id.ca, a, "<unknown>", b, id.ua, id.ua, 4, "DestChannel", id.cb, "DestUniqueid", id.ub, "DialString", b),
		scaleChanEv("Newstate", id.cb, b, a, b, id.ub, id.ua, 5),
		scaleEv("ExtensionStatus", "Exten", b, "Context", "from-internal", "Hint", "PJSIP/"+b, "Status", "8", "StatusText", "Ringing"),
		scaleChanEv("Newstate", id.cb, b, a, b, id.ub, id.ua, 6),
		scaleChanEv("DialEnd", id.ca, a, b, b, id.ua, id.ua, 4, "DestChannel", id.cb, "DestUniqueid", id.ub, "DialStatus", "ANSWER"),
		scaleChanEv("Newstate", id.ca, a, b, b, id.ua, id.ua, 6),
		scaleEv("BridgeCreate", "BridgeUniqueid", id.br, "BridgeType", "basic", "BridgeTechnology", "simple_bridge"),
		scaleChanEv("BridgeEnter", id.cb, b, a, "", id.ub, id.ua, 6, "BridgeUniqueid", id.br),
		scaleChanEv("BridgeEnter", id.ca, a, b, b, id.ua, id.ua, 6, "BridgeUniqueid", id.br),
		scaleEv("ExtensionStatus", "Exten", a, "Context", "from-internal", "Hint", "PJSIP/"+a, "Status", "1", "StatusText", "InUse"),
		scaleEv("ExtensionStatus", "Exten", b, "Context", "from-internal", "Hint", "PJSIP/"+b, "Status", "1", "StatusText", "InUse"),
	)
}

// end returns the events that hang up the oldest call.
func (s *scalePBX) end() []ami.Message {
	c, id := s.up[0], s.ids[0]
	s.up, s.ids = s.up[1:], s.ids[1:]
	s.free = append(s.free, c[0], c[1])
	a, b := scaleExten(c[0]), scaleExten(c[1])
	return append([]ami.Message(nil),
		scaleChanEv("BridgeLeave", id.ca, a, b, b, id.ua, id.ua, 6, "BridgeUniqueid", id.br),
		scaleChanEv("BridgeLeave", id.cb, b, a, "", id.ub, id.ua, 6, "BridgeUniqueid", id.br),
		scaleEv("BridgeDestroy", "BridgeUniqueid", id.br),
		scaleChanEv("Hangup", id.cb, b, a, "", id.ub, id.ua, 6, "Cause", "16"),
		scaleChanEv("Hangup", id.ca, a, b, b, id.ua, id.ua, 6, "Cause", "16"),
		scaleEv("ExtensionStatus", "Exten", a, "Context", "from-internal", "Hint", "PJSIP/"+a, "Status", "0", "StatusText", "Idle"),
		scaleEv("ExtensionStatus", "Exten", b, "Context", "from-internal", "Hint", "PJSIP/"+b, "Status", "0", "StatusText", "Idle"),
	)
}

// scaleEngine is an engine holding exts registered extensions and calls
// two-party calls up, and the generator that keeps it that way.
func scaleEngine(tb testing.TB, exts, calls int) (*Engine, *scalePBX) {
	tb.Helper()
	now := time.Unix(1796028439, 0)
	e := New(Config{Now: func() time.Time { return now }})
	s := newScalePBX(exts)
	for _, m := range s.register() {
		e.Apply(m)
	}
	for range calls {
		for _, m := range s.start() {
			e.Apply(m)
		}
	}
	e.Publish()
	return e, s
}

// scaleStream is the endless event stream at a steady number of calls: the
// oldest call ends, a new one starts.
func (s *scalePBX) stream(n int) []ami.Message {
	var out []ami.Message
	for len(out) < n {
		out = append(out, s.end()...)
		out = append(out, s.start()...)
	}
	return out
}

// BenchmarkApplyPublishAtScale streams call ends and starts into an engine
// holding 5,000 extensions and 2,000 calls, with a Publish every 64 events
// (a full read batch of the AMI reader, as under load) or every 512:
// plain internal calls (scalePBX), and a call centre's mix (mix, below).
func BenchmarkApplyPublishAtScale(b *testing.B) {
	for _, batch := range []int{64, 512} {
		b.Run("batch"+strconv.Itoa(batch), func(b *testing.B) {
			e, s := scaleEngine(b, 5000, 2000)
			benchAtScale(b, batch, e, func() []ami.Message { return s.stream(1 << 16) })
		})
	}
	for _, batch := range []int{64, 512} {
		b.Run("mix/batch"+strconv.Itoa(batch), func(b *testing.B) {
			e, m := mixEngine(b, 5000, 2000)
			benchAtScale(b, batch, e, func() []ami.Message { return m.stream(1 << 16) })
		})
	}
}

// benchAtScale applies the events next returns (pre-built, outside the
// timer: the benchmark measures the engine) and Publishes every batch.
func benchAtScale(b *testing.B, batch int, e *Engine, next func() []ami.Message) {
	msgs := next()
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuTime()
	j := 0
	for i := range b.N {
		e.Apply(msgs[j])
		if j++; j == len(msgs) {
			b.StopTimer()
			c := cpuTime()
			msgs = next()
			j = 0
			cpu += cpuTime() - c
			b.StartTimer()
		}
		if i%batch == batch-1 {
			e.Publish()
		}
	}
	e.Publish()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(b.N)/(cpuTime()-cpu).Seconds(), "events/cpu-s")
}

// mixPBX is a call centre on loadtest/synthpbx, in virtual time: 25
// queues of static members, a fifth of the extensions (at 5,000: 40
// each, 1,000 agents), and of the new calls 30%
// outside callers into a queue, 30% trunk calls (half in, half out), 10%
// internal calls transferred (half blind, half attended), 30% plain
// internal calls; 50 new calls a second, each ringing 1 s and lasting
// 40 s, so 2,000 calls are up.
type mixPBX struct {
	gen *synthpbx.Gen
	out []ami.Message
	now time.Time
}

const mixRate = 50 // new calls a second

// mixEngine is an engine holding exts extensions and calls calls of the
// mix up, and the mix that keeps it that way.
func mixEngine(tb testing.TB, exts, calls int) (*Engine, *mixPBX) {
	return mixEngineOf(tb, exts, calls, nil)
}

// mixEngineOf is mixEngine with opaque names by op.
func mixEngineOf(tb testing.TB, exts, calls int, op Opaquer) (*Engine, *mixPBX) {
	tb.Helper()
	m := &mixPBX{now: time.Unix(1796028439, 0)}
	clock := func() time.Time { return m.now }
	p, err := synthpbx.New(exts, 25, exts/125, func(msg ami.Message) { m.out = append(m.out, msg) }, clock)
	if err != nil {
		tb.Fatal(err)
	}
	hold := time.Duration(calls) * time.Second / mixRate
	m.gen, err = synthpbx.NewGen(p, synthpbx.Mix{Queue: 0.3, Trunk: 0.3, Transfer: 0.1, Hold: hold, Ring: time.Second}, 1)
	if err != nil {
		tb.Fatal(err)
	}
	e := New(Config{Now: clock, Opaque: op})
	p.Announce()
	for range calls {
		m.gen.Start(m.now) // a call's steps are spread over its length: start them as the steady state does
		m.now = m.now.Add(time.Second / mixRate)
		m.gen.Due(m.now)
	}
	for _, msg := range m.out {
		e.Apply(msg)
	}
	m.out = m.out[:0]
	e.Publish()
	if up := m.gen.Up(); up < calls*9/10 {
		tb.Fatalf("%d calls up, want about %d", up, calls)
	}
	return e, m
}

// stream is at least n more events of the steady mix.
func (m *mixPBX) stream(n int) []ami.Message {
	m.out = make([]ami.Message, 0, n+64) // a Start or Due emits a few events past n
	for len(m.out) < n {
		m.now = m.now.Add(time.Second / mixRate)
		m.gen.Due(m.now)
		m.gen.Start(m.now)
	}
	return m.out
}

// scaleRounds pre-builds n rounds of the stream: in each, the oldest call
// ends and a new one starts (22 events, 4 extensions changed).
func (s *scalePBX) rounds(n int) [][]ami.Message {
	out := make([][]ami.Message, n)
	for i := range out {
		out[i] = append(s.end(), s.start()...)
	}
	return out
}

// BenchmarkPublishAtScale holds 5,000 extensions and 10 to 2,000 calls up
// and applies one round (a call ends, another starts) then Publishes. The
// cost of a round, and of its Publish (ns/publish), must not grow with the
// number of calls up: Publish re-derives and encodes the owners the round
// touched, nothing else (dirty.go, extmap.go). Both are reported in CPU
// time (cpu-ns/op, cpu-ns/publish), steadier than wall time on a shared
// machine; the two rusage reads around each Publish add a small constant.
func BenchmarkPublishAtScale(b *testing.B) {
	for _, calls := range []int{10, 100, 500, 2000} {
		b.Run("calls"+strconv.Itoa(calls), func(b *testing.B) {
			e, s := scaleEngine(b, 5000, calls)
			rounds := s.rounds(1024)
			var pub time.Duration
			b.ReportAllocs()
			b.ResetTimer()
			cpu := cpuTime()
			j := 0
			for range b.N {
				for _, m := range rounds[j] {
					e.Apply(m)
				}
				t := cpuTime()
				e.Publish()
				pub += cpuTime() - t
				if j++; j == len(rounds) {
					b.StopTimer()
					c := cpuTime()
					rounds, j = s.rounds(1024), 0
					cpu += cpuTime() - c
					b.StartTimer()
				}
			}
			b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(pub.Nanoseconds())/float64(b.N), "cpu-ns/publish")
		})
	}
}

// TestPublishAtScaleAllocs bounds the allocations of one round at 5,000
// extensions and 2,000 calls: a shard copied as a small slice, the
// extension's view and its JSON at its size, the new channels and
// conversations. Copying whole maps per changed extension (what shards
// were before) or re-deriving unrelated owners would break it.
func TestPublishAtScaleAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	e, s := scaleEngine(t, 5000, 2000)
	rounds := s.rounds(300)
	j := 0
	n := testing.AllocsPerRun(200, func() {
		for _, m := range rounds[j] {
			e.Apply(m)
		}
		e.Publish()
		j++
	})
	t.Logf("%.1f allocations per round (22 events, one Publish)", n)
	if n > 90 {
		t.Errorf("a round allocates %.1f times, want at most 90", n)
	}
}

// TestMixPublishDerivesWhatChanged runs the call centre's mix (queue,
// trunk and transferred calls: hundreds of conversations on one trunk) in
// batches of random size and, after every Publish, re-derives every
// owner in full: what was published, and the trunk's bytes put together
// from its conversations' pieces (trunkconvs.go), must be what a full
// derivation and encoding give.
func TestMixPublishDerivesWhatChanged(t *testing.T) {
	e, m := mixEngineOf(t, 1200, 300, hexOpaquer{})
	r := rand.New(rand.NewPCG(3, 5))
	checkFull(t, e, "after the fill")
	// A reader of the feed that applies each trunkConversations change to
	// the trunks of the first snapshot has, after every Publish, the
	// trunks of that Publish's snapshot (durations aside: a conversation
	// keeps the one it was sent with).
	trunks := trunksOf(t, e.Snapshot().TrunksJSON())
	hidden := trunksOf(t, e.Snapshot().TrunksJSONAs(NumbersHidden))
	// The same for the queues and their queueMembers changes.
	queues := collOf(t, e.Snapshot().QueuesJSON())
	queuesHidden := collOf(t, e.Snapshot().QueuesJSONAs(NumbersHidden))
	seq := e.Snapshot().Seq
	deltas, queueDeltas, follows := 0, 0, 0
	follow := func(where string) {
		t.Helper()
		cs, ok := e.Feed().Since(seq)
		if !ok {
			t.Fatalf("%s: the feed lost changes after %d", where, seq)
		}
		for _, c := range cs {
			seq = c.Seq
			if c.Type == TrunkUpdate || c.Type == QueueUpdate {
				t.Fatalf("%s: a %s in the feed", where, c.Type)
			}
			if c.Type == QueueMembers {
				applyQueueDelta(t, queues, c.Data)
				applyQueueDelta(t, queuesHidden, c.JSON(NumbersHidden))
				queueDeltas++
			}
			if c.Type == TrunkConversations {
				applyTrunkDelta(t, trunks, c.Data)
				applyTrunkDelta(t, hidden, c.JSON(NumbersHidden))
				deltas++
			}
		}
		if follows++; follows%4 != 0 && !strings.HasPrefix(where, "end") {
			return // the comparison costs what the trunks hold: one in four
		}
		if want := trunksOf(t, e.Snapshot().TrunksJSON()); !reflect.DeepEqual(trunks, want) {
			t.Fatalf("%s: the trunks the changes give\n%v\nthe snapshot's\n%v", where, trunks, want)
		}
		if want := trunksOf(t, e.Snapshot().TrunksJSONAs(NumbersHidden)); !reflect.DeepEqual(hidden, want) {
			t.Fatalf("%s: the hidden trunks the changes give\n%v\nthe snapshot's\n%v", where, hidden, want)
		}
		if want := collOf(t, e.Snapshot().QueuesJSON()); !reflect.DeepEqual(queues, want) {
			t.Fatalf("%s: the queues the changes give\n%v\nthe snapshot's\n%v", where, queues, want)
		}
		if want := collOf(t, e.Snapshot().QueuesJSONAs(NumbersHidden)); !reflect.DeepEqual(queuesHidden, want) {
			t.Fatalf("%s: the hidden queues the changes give\n%v\nthe snapshot's\n%v", where, queuesHidden, want)
		}
		// The latest change of each queue leads to its whole JSON, in
		// both classes (a queueUpdate for clients that take no deltas).
		cs, _ = e.Feed().Since(0)
		for i := len(cs) - 1; i >= 0; i-- {
			if c := &cs[i]; c.Type == QueueMembers {
				if w := c.Whole(Full); w != nil && !bytes.Equal(w, e.Snapshot().QueueJSON(c.Key)) {
					t.Fatalf("%s: queue %s's change leads to\n%s\nthe snapshot's\n%s", where, c.Key, w, e.Snapshot().QueueJSON(c.Key))
				}
				if w := c.Whole(NumbersHidden); w != nil && !bytes.Equal(w, e.Snapshot().QueueJSONAs(c.Key, NumbersHidden)) {
					t.Fatalf("%s: queue %s's hidden change leads to\n%s", where, c.Key, w)
				}
			}
		}
	}
	inBatches(e, m.stream(20000), r, func(i, n int) {
		m.now = m.now.Add(time.Duration(r.IntN(700)) * time.Millisecond) // durations move on
		e.Publish()
		checkFull(t, e, "event "+strconv.Itoa(i))
		follow("event " + strconv.Itoa(i))
		if i%3000 < n {
			e.RefreshDurations()
			checkFull(t, e, "refresh at event "+strconv.Itoa(i))
		}
	})
	follow("end")
	if n := (TrunkMap{e.pub.trunk}).Get("trunk").Conversations.Len(); n < 50 {
		t.Errorf("the trunk holds %d conversations, want about 120", n)
	}
	if deltas < 100 {
		t.Errorf("%d trunkConversations changes, want hundreds", deltas)
	}
	if queueDeltas < 100 {
		t.Errorf("%d queueMembers changes, want hundreds", queueDeltas)
	}
}

// hexOpaquer names a channel by its name in hex: one name each, as the
// real one (testOpaquer's names collide).
type hexOpaquer struct{}

func (hexOpaquer) AppendChannel(b []byte, name string) []byte {
	if name == "" {
		return b
	}
	return hex.AppendEncode(append(b, '~'), []byte(name))
}

// trunksOf decodes a trunks collection, each conversation without its
// duration.
func trunksOf(t *testing.T, b []byte) map[string]map[string]any {
	t.Helper()
	var m map[string]map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("trunks: %v\n%s", err, b)
	}
	for _, tr := range m {
		for _, cv := range tr["conversations"].(map[string]any) {
			delete(cv.(map[string]any), "duration")
		}
	}
	return m
}

// applyTrunkDelta applies a trunkConversations change to trunks, as a
// client would, each conversation without its duration.
func applyTrunkDelta(t *testing.T, trunks map[string]map[string]any, data []byte) {
	t.Helper()
	applyDelta(t, trunks, data, "name", "conversations", func(cv any) { delete(cv.(map[string]any), "duration") })
}

// applyDelta applies a delta change to its collection m as a client
// would (docs/websocket.md): the entity under the change's key field
// (new: its items empty) gets the change's fields but "set" and
// "removed", the items of "set" (each passed to norm first) put under
// their keys in its items field, those of "removed" deleted.
func applyDelta(t *testing.T, m map[string]map[string]any, data []byte, key, items string, norm func(any)) {
	t.Helper()
	var d map[string]any
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("delta: %v\n%s", err, data)
	}
	if _, ok := d[items]; ok {
		t.Fatalf("a delta with its %s whole: %s", items, data)
	}
	name := d[key].(string)
	x := m[name]
	if x == nil {
		x = map[string]any{items: map[string]any{}}
		m[name] = x
	}
	have := x[items].(map[string]any)
	for k, it := range d["set"].(map[string]any) {
		norm(it)
		have[k] = it
	}
	for _, k := range d["removed"].([]any) {
		if _, ok := have[k.(string)]; !ok {
			t.Fatalf("the delta removes %s, which %s does not hold: %s", k, name, data)
		}
		delete(have, k.(string))
	}
	for k, v := range d {
		if k != "set" && k != "removed" {
			x[k] = v
		}
	}
}

// collOf decodes a collection ({"key":{...},...}).
func collOf(t *testing.T, b []byte) map[string]map[string]any {
	t.Helper()
	var m map[string]map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("collection: %v\n%s", err, b)
	}
	return m
}

// applyQueueDelta applies a queueMembers change to queues, as a client
// would.
func applyQueueDelta(t *testing.T, queues map[string]map[string]any, data []byte) {
	t.Helper()
	applyDelta(t, queues, data, "queue", "members", func(any) {})
}

// TestMixPublishAllocs bounds what Apply and Publish allocate with the
// call centre's mix at 5,000 extensions and 2,000 calls (about 1,200 on
// the trunk), a Publish every 64 events: a trunk change copies the chunks
// it changes and encodes the conversations that changed, not the trunk.
// Copying the trunk's conversations or writing its JSON whole on each
// change (as before convmap.go) breaks it.
func TestMixPublishAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	if testing.Short() {
		t.Skip("builds 2,000 calls")
	}
	e, m := mixEngine(t, 5000, 2000)
	msgs := m.stream(64 * 300)
	run := func(msgs []ami.Message) {
		for i, msg := range msgs {
			e.Apply(msg)
			if i%64 == 63 {
				e.Publish()
			}
		}
	}
	run(msgs[:64*50]) // warm up: scratch buffers at their size
	msgs = msgs[64*50 : 64*300]
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	run(msgs)
	runtime.ReadMemStats(&after)
	n := float64(len(msgs))
	allocs, bytes := float64(after.Mallocs-before.Mallocs)/n, float64(after.TotalAlloc-before.TotalAlloc)/n
	t.Logf("%.1f allocations, %.0f bytes an event", allocs, bytes)
	if allocs > 8 || bytes > 4096 {
		t.Errorf("an event allocates %.1f times and %.0f bytes, want at most 8 and 4 KB", allocs, bytes)
	}
}

// inBatches applies msgs to e in batches of 1 to 100 events drawn from r,
// calling after with the events applied so far and the batch's size.
func inBatches(e *Engine, msgs []ami.Message, r *rand.Rand, after func(i, n int)) {
	for i := 0; i < len(msgs); {
		n := 1 + r.IntN(100)
		for _, msg := range msgs[i:min(i+n, len(msgs))] {
			e.Apply(msg)
		}
		i += n
		after(i, n)
	}
}
