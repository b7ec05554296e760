package ws

import (
	"bytes"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
)

// BenchmarkFanout queues one change to N subscribed clients (no sockets):
// the hub's cost per change. allocs/op stays constant as N grows: the
// frame is encoded once and shared.
func BenchmarkFanout(b *testing.B) {
	users := testUsers(b)
	data := []byte(`{"exten":"201","name":"Alice Rossi","status":"busy","dnd":false,"cf":"","cfb":"","cfu":"","ip":"127.0.0.1","port":"5062","sipuseragent":"SIPp","chanType":"pjsip","context":"from-internal","conversations":{}}`)
	for _, n := range []int{1, 100, 1000, 10000} {
		b.Run(fmt.Sprintf("clients=%d", n), func(b *testing.B) {
			h := bareHub(b, calls.New(calls.Config{}), users)
			u, _ := users.Lookup("paula")
			for range n {
				h.addFake(u, topicExtensions)
			}
			cs := []calls.Change{{Type: calls.ExtenUpdate, Key: "201", Data: data}}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				cs[0].Seq = uint64(i + 1)
				h.fanout(cs)
				if i%16 == 15 { // a writer drains now and then
					for _, c := range h.clients {
						c.mu.Lock()
						c.dropQueued()
						c.mu.Unlock()
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/client")
		})
	}
}

// BenchmarkLoopback publishes changes through a real engine to N clients
// reading over loopback TCP, and waits until every client has the last.
func BenchmarkLoopback(b *testing.B) {
	for _, n := range []int{10, 100} {
		b.Run(fmt.Sprintf("clients=%d", n), func(b *testing.B) {
			e := newEnv(b, calls.Config{}, auth.Config{}, Config{})
			var got atomic.Int64
			var wg sync.WaitGroup
			var target atomic.Uint64
			target.Store(1 << 62)
			for range n {
				c := e.dial("root")
				expectOp(b, c, "hello")
				c.Subscribe("extensions")
				expectOp(b, c, "snapshot")
				wg.Go(func() {
					for {
						raw, err := c.ReadRaw()
						if err != nil {
							return
						}
						got.Add(1)
						if seq := seqOf(raw); seq >= target.Load() {
							return
						}
					}
				})
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				e.apply(devState(fmt.Sprint(200+i%100), i/100%2 == 0))
			}
			target.Store(e.eng.Feed().LastSeq())
			e.apply(devState("299", true))
			e.apply(devState("299", false))
			wg.Wait()
			b.ReportMetric(float64(got.Load())/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// seqOf finds "seq":N in a message.
func seqOf(b []byte) uint64 {
	i := bytes.Index(b, []byte(`"seq":`))
	if i < 0 {
		return 0
	}
	var n uint64
	for _, c := range b[i+6:] {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + uint64(c-'0')
	}
	return n
}

// BenchmarkFlush writes one frame to an idle client over loopback TCP:
// start a flusher, borrow a batch, writev, end. allocs/op stays 0.
func BenchmarkFlush(b *testing.B) {
	h := bareHub(b, calls.New(calls.Config{}), testUsers(b))
	c := loopConn(b, h)
	f := &frame{b: textFrame([]byte(`{"op":"event","seq":1,"type":"extenUpdate","data":{}}`)), seq: 1, ent: firstEnt, msgs: 1}
	b.ReportAllocs()
	for b.Loop() {
		c.sendOne(f)
	}
}

// BenchmarkFanoutFiltered: one op is a real change (an extension in a
// call changes its device state: Apply and Publish) fanned out to N
// subscribed clients who may not see its call (alice, topic extensions):
// the change's NumbersHidden bytes are made once per change and its frame
// shared by all N. With "full" the same N clients see everything (paula):
// the difference is the cost of the hidden class.
func BenchmarkFanoutFiltered(b *testing.B) {
	users := testUsers(b)
	for _, who := range []string{"alice", "paula"} {
		for _, n := range []int{1, 1000} {
			b.Run(fmt.Sprintf("%s/clients=%d", who, n), func(b *testing.B) {
				eng := calls.New(calls.Config{Trunks: []string{"trunk"}, Opaque: auth.Opaquer{}})
				rec := loadRecording(b, "load_10_calls_5cps")
				for _, m := range rec[:len(rec)/2] {
					eng.Apply(m)
				}
				s := eng.Publish()
				var busy string
				for _, k := range s.Extensions.Keys() {
					if x, _ := s.Extensions.Lookup(k); len(x.Conversations) > 0 && k != "201" {
						busy = k
						break
					}
				}
				if busy == "" {
					b.Fatal("no extension in a call")
				}
				h := bareHub(b, eng, users)
				h.last = s.Seq
				u, _ := users.Lookup(who)
				for range n {
					h.addFake(u, topicExtensions)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; b.Loop(); i++ {
					st := "INUSE"
					if i%2 == 1 {
						st = "RINGINUSE"
					}
					eng.Apply(ami.NewMessage(ami.Header{Key: "Event", Value: "DeviceStateChange"}, ami.Header{Key: "Device", Value: "PJSIP/" + busy}, ami.Header{Key: "State", Value: st}))
					s := eng.Publish()
					cs, _ := eng.Feed().Since(h.last)
					h.fanout(cs)
					h.last = s.Seq
					if i%16 == 15 {
						for _, c := range h.clients {
							c.mu.Lock()
							c.dropQueued()
							c.mu.Unlock()
						}
					}
				}
			})
		}
	}
}
