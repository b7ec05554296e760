package loadtest

import (
	"io"
	"net"
	"strconv"
	"testing"
	"time"
)

// BenchmarkLoopbackWrite is the floor under an e2e run's fan-out: the CPU
// (this process's, user and system, writer and reader both) of one
// write(2) of n bytes to a loopback TCP socket that another goroutine
// reads, as the bridge writes each screen's batch and a screen reads it.
// cpu-µs/write is what a fan-out to N screens costs N times over.
func BenchmarkLoopbackWrite(b *testing.B) {
	for _, n := range []int{600, 4 << 10, 16 << 10, 64 << 10} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			ln, err := net.Listen("tcp4", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			defer ln.Close()
			done := make(chan struct{})
			go func() {
				defer close(done)
				c, err := ln.Accept()
				if err != nil {
					return
				}
				io.Copy(io.Discard, c)
			}()
			c, err := net.Dial("tcp4", ln.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			msg := make([]byte, n)
			b.SetBytes(int64(n))
			cpu0, t0 := cpuTime(), time.Now()
			for b.Loop() {
				if _, err := c.Write(msg); err != nil {
					b.Fatal(err)
				}
			}
			cpu, wall := cpuTime()-cpu0, time.Since(t0)
			c.Close()
			<-done
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/write")
			b.ReportMetric(cpu.Seconds()/wall.Seconds(), "cores")
		})
	}
}
