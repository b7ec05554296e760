package ami_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ivahaev/amigo"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/ami/amitest"
)

// benchStream is every recording back to back under one banner, and the
// number of frames in it.
func benchStream(b *testing.B) ([]byte, int) {
	b.Helper()
	files, _ := filepath.Glob("testdata/*.ami")
	stream := []byte(ami.DefaultBanner + "\r\n")
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		stream = append(stream, data[bytes.IndexByte(data, '\n')+1:]...)
	}
	return stream, bytes.Count(stream, []byte("\r\n\r\n"))
}

func reportRate(b *testing.B, perOp int, unit string) {
	n := float64(perOp) * float64(b.N)
	b.ReportMetric(n/b.Elapsed().Seconds(), unit+"/s")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/"+unit)
}

// BenchmarkReader frames the recordings with ami.Reader.
func BenchmarkReader(b *testing.B) {
	stream, want := benchStream(b)
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		r := ami.NewReader(bufio.NewReaderSize(bytes.NewReader(stream), 64<<10), ami.ReaderConfig{})
		if _, err := r.ReadBanner(); err != nil {
			b.Fatal(err)
		}
		n := 0
		for {
			_, err := r.ReadMessage()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if n != want {
			b.Fatalf("%d messages, want %d", n, want)
		}
	}
	reportRate(b, want, "msg")
}

// BenchmarkAmigoReader frames the same bytes the way amigo v0.1.10 does:
// amigoReadMessage is its unexported readMessage, plus the two headers its
// reader goroutine stamps on every message.
func BenchmarkAmigoReader(b *testing.B) {
	stream, want := benchStream(b)
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		br := bufio.NewReaderSize(bytes.NewReader(stream), 64<<10)
		br.ReadString('\n') // the banner
		n := 0
		for i := 0; ; i++ {
			m, err := amigoReadMessage(br)
			if err != nil {
				break
			}
			m["#"] = strconv.Itoa(i)
			m["TimeReceived"] = time.Now().Format(time.RFC3339Nano)
			if len(m) > 2 {
				n++ // a stray blank line yields an empty map: not a frame
			}
		}
		if n != want {
			b.Fatalf("%d messages, want %d", n, want)
		}
	}
	reportRate(b, want, "msg")
}

// amigoReadMessage is readMessage from github.com/ivahaev/amigo v0.1.10
// (ami.go, MIT licence), copied verbatim because it is unexported; its
// commandResponseKey constant is inlined.
func amigoReadMessage(r *bufio.Reader) (m map[string]string, err error) {
	m = make(map[string]string)
	var responseFollows bool
	for {
		kv, _, err := r.ReadLine()
		if len(kv) == 0 {
			return m, err
		}

		var key string
		i := bytes.IndexByte(kv, ':')
		if i >= 0 {
			endKey := i
			for endKey > 0 && kv[endKey-1] == ' ' {
				endKey--
			}
			key = string(kv[:endKey])
		}

		if key == "" && !responseFollows {
			if err != nil {
				return m, err
			}

			continue
		}

		if responseFollows && key != "Privilege" && key != "ActionID" {
			if string(kv) != "--END COMMAND--" {
				if len(m["CommandResponse"]) == 0 {
					m["CommandResponse"] = string(kv)
				} else {
					m["CommandResponse"] = fmt.Sprintf("%s\n%s", m["CommandResponse"], string(kv))
				}
			}

			if err != nil {
				return m, err
			}

			continue
		}

		i++
		for i < len(kv) && (kv[i] == ' ' || kv[i] == '\t') {
			i++
		}
		value := string(kv[i:])

		if key == "Response" && value == "Follows" {
			responseFollows = true
		}

		m[key] = value

		if err != nil {
			return m, err
		}
	}
}

// streamServer is a bare AMI server for the end-to-end benchmarks: it
// accepts one connection, answers its Login, then writes whatever is sent
// on feed.
func streamServer(b *testing.B) (addr string, feed chan<- []byte) {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ch := make(chan []byte)
	go func() {
		defer ln.Close()
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		nc.Write([]byte(ami.DefaultBanner + "\r\n"))
		r := ami.NewReader(bufio.NewReader(nc), ami.ReaderConfig{})
		login, err := r.ReadMessage()
		if err != nil {
			return
		}
		resp := "Response: Success\r\n"
		if id := login.ActionID(); id != "" {
			resp += "ActionID: " + id + "\r\n"
		}
		nc.Write([]byte(resp + "Message: Authentication accepted\r\n\r\n"))
		go io.Copy(io.Discard, nc)
		for data := range ch {
			if _, err := nc.Write(data); err != nil {
				return
			}
		}
	}()
	return ln.Addr().String(), ch
}

// eventsOnly is the benchmark stream without its banner and responses.
func eventsOnly(b *testing.B) ([]byte, int) {
	stream, _ := benchStream(b)
	msgs := readFrames(b, stream)
	var out []byte
	n := 0
	for _, m := range msgs {
		if m.Kind() == ami.KindEvent {
			out, _ = ami.AppendMessage(out, m)
			n++
		}
	}
	return out, n
}

// BenchmarkClientEvents streams the recordings' events through a loopback
// socket into ami.Client and its consumer.
func BenchmarkClientEvents(b *testing.B) {
	events, n := eventsOnly(b)
	addr, feed := streamServer(b)
	defer close(feed)
	c := ami.NewClient(ami.Config{Addr: addr, PingInterval: -1})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx)
	}()
	defer func() { cancel(); <-done }()
	if evs, err := c.Next(ctx); err != nil || evs[0].Link != ami.LinkUp {
		b.Fatalf("no LinkUp: %v", err)
	}
	b.ReportAllocs()
	for b.Loop() {
		feed <- events
		for got := 0; got < n; {
			evs, err := c.Next(ctx)
			if err != nil {
				b.Fatal(err)
			}
			got += len(evs)
		}
	}
	reportRate(b, n, "event")
}

// BenchmarkAmigoClient streams the same events into amigo's real client.
// amigo has no Close: its goroutines outlive the benchmark.
func BenchmarkAmigoClient(b *testing.B) {
	events, n := eventsOnly(b)
	addr, feed := streamServer(b)
	host, port, _ := net.SplitHostPort(addr)
	a := amigo.New(&amigo.Settings{Host: host, Port: port, Username: "u", Password: "p"})
	var got atomic.Int64
	a.RegisterDefaultHandler(func(map[string]string) { got.Add(1) })
	a.Connect()
	for !a.Connected() {
		time.Sleep(time.Millisecond)
	}
	b.ReportAllocs()
	want := int64(0)
	for b.Loop() {
		feed <- events
		want += int64(n)
		for got.Load() < want {
			time.Sleep(20 * time.Microsecond)
		}
	}
	reportRate(b, n, "event")
}

func BenchmarkWriteMessage(b *testing.B) {
	m := ami.NewAction("Originate", "ActionID", "ab12-7", "Channel", "PJSIP/201", "Exten", "202",
		"Context", "from-internal", "Priority", "1", "CallerID", "Alice <201>", "Async", "true",
		"Variable", "CTI_USER=alice")
	w := bufio.NewWriter(io.Discard)
	b.ReportAllocs()
	for b.Loop() {
		if err := ami.WriteMessage(w, m); err != nil {
			b.Fatal(err)
		}
	}
	w.Flush()
}

// BenchmarkClientDo is one Ping round trip over loopback.
func BenchmarkClientDo(b *testing.B) {
	srv := amitest.NewServer(b)
	cfg := srv.ClientConfig()
	cfg.PingInterval = -1
	c := ami.NewClient(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx)
	}()
	defer func() { cancel(); <-done }()
	for !c.Connected() {
		time.Sleep(time.Millisecond)
	}
	ping := ami.NewAction("Ping")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Do(ctx, ping); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMessageGet looks up, in each event of a recorded call, the
// headers the call engine reads of a channel event (most present, one
// missing), as calls.Engine.Apply does.
func BenchmarkMessageGet(b *testing.B) {
	data, err := os.ReadFile("testdata/basic_call_caller_hangup.ami")
	if err != nil {
		b.Fatal(err)
	}
	msgs := readFrames(b, data)
	keys := []string{"Uniqueid", "Channel", "ChannelState", "CallerIDNum", "CallerIDName",
		"ConnectedLineNum", "ConnectedLineName", "Linkedid", "Exten", "AccountCode", "DestUniqueid"}
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	for range b.N {
		for _, m := range msgs {
			for _, k := range keys {
				n += len(m.Get(k))
			}
		}
	}
	if n == 0 {
		b.Fatal("nothing found")
	}
	reportRate(b, len(keys)*len(msgs), "lookup")
}

// BenchmarkMessageGetMissing looks up in each event of a recorded call a
// header live events never carry (ActionID, as calls.Engine asks of an
// event to tell a list item from it): both of Lookup's passes, to the end.
func BenchmarkMessageGetMissing(b *testing.B) {
	data, err := os.ReadFile("testdata/basic_call_caller_hangup.ami")
	if err != nil {
		b.Fatal(err)
	}
	var msgs []ami.Message
	for _, m := range readFrames(b, data) {
		if m.Event() != "" {
			msgs = append(msgs, m)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	for range b.N {
		for _, m := range msgs {
			n += len(m.ActionID())
		}
	}
	if n != 0 {
		b.Fatal("an event with an ActionID")
	}
	reportRate(b, len(msgs), "lookup")
}
