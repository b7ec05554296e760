package loadtest

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// source is what a sampler collects from once a second: a worker's
// counters since the last collection.
type source interface {
	collect(into *Histogram) (reqs, bytes, non2xx uint64, status map[int]uint64)
}

func (w *worker) collect(into *Histogram) (reqs, bytes, non2xx uint64, status map[int]uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	into.Merge(&w.hist)
	w.hist.Reset()
	reqs, bytes, non2xx, status = w.reqs, w.bytes, w.non2xx, w.status
	w.reqs, w.bytes, w.non2xx, w.status = 0, 0, 0, nil
	return reqs, bytes, non2xx, status
}

// sampler turns its sources' counters into per-second samples and the
// run's totals. Only the goroutine calling run touches it.
type sampler struct {
	start    time.Time
	progress func(Second)
	sources  []source
	total    Histogram
	second   Histogram
	seconds  []Second
	reqs     uint64
	bytes    uint64
	non2xx   uint64
	status   map[int]uint64
}

func newSampler(start time.Time, progress func(Second)) *sampler {
	return &sampler{start: start, progress: progress, status: map[int]uint64{}}
}

func (s *sampler) add(src source) { s.sources = append(s.sources, src) }

// tick collects one sample ending now.
func (s *sampler) tick() {
	s.second.Reset()
	var sec Second
	for _, src := range s.sources {
		r, b, n, st := src.collect(&s.second)
		sec.Requests += r
		sec.Bytes += b
		s.non2xx += n
		for k, v := range st {
			s.status[k] += v
		}
	}
	sec.At = time.Since(s.start)
	sec.P50, sec.P99, sec.Max = s.second.Quantile(0.5), s.second.Quantile(0.99), s.second.Max()
	s.total.Merge(&s.second)
	s.reqs += sec.Requests
	s.bytes += sec.Bytes
	s.seconds = append(s.seconds, sec)
	if s.progress != nil {
		s.progress(sec)
	}
}

// run samples once a second until done is closed, then a last time.
func (s *sampler) run(done <-chan struct{}) {
	next := s.start.Add(time.Second)
	for {
		t := time.NewTimer(time.Until(next))
		select {
		case <-done:
			t.Stop()
			s.tick()
			return
		case <-t.C:
			s.tick()
			next = next.Add(time.Second)
		}
	}
}

// fill copies the totals into a report.
func (s *sampler) fill(r *Report) {
	r.Latency = &s.total
	r.PerSecond = s.seconds
	r.Requests, r.Bytes, r.Non2xx = s.reqs, s.bytes, s.non2xx
	if len(s.status) > 0 {
		r.Status = s.status
	}
}

// cpuStat is the first line of /proc/stat: jiffies busy and in total.
type cpuStat struct{ busy, total uint64 }

func machineCPU() *cpuStat {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return nil
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return nil
	}
	var s cpuStat
	for i, x := range f[1:] {
		n, _ := strconv.ParseUint(x, 10, 64)
		s.total += n
		if i != 3 && i != 4 { // idle, iowait
			s.busy += n
		}
	}
	return &s
}

func (s *cpuStat) busySince(prev *cpuStat) float64 {
	if s.total <= prev.total {
		return 0
	}
	return float64(s.busy-prev.busy) / float64(s.total-prev.total)
}

// isLocal says whether addr is on this machine (loopback or one of its
// addresses), where the target shares the CPUs with the load tool.
func isLocal(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return false
	}
	if ip.IsLoopback() || ip.IsUnspecified() {
		return true
	}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
			return true
		}
	}
	return false
}

// bottleneckNotes says when the numbers may be the load tool's limit
// rather than the server's.
func bottleneckNotes(r *Report, addr string) []string {
	var notes []string
	procs := runtime.GOMAXPROCS(0)
	if !cpuMeasured {
		notes = append(notes, "the load tool's CPU is not measured on "+runtime.GOOS+" (its 0 is no measurement): whether it was the limit is unknown")
	}
	if r.ClientCPU >= 0.9*float64(procs) {
		notes = append(notes, fmt.Sprintf("the load tool itself was CPU-bound (%.2f of its %d CPUs busy): the server may be faster than this run shows; compare with wrk in the same sitting", r.ClientCPU, procs))
	}
	if isLocal(addr) && r.MachineCPU >= 0.9 {
		notes = append(notes, fmt.Sprintf("the machine's CPUs were %.0f%% busy and the target is local: the load tool (%.2f CPUs) and the server competed for them, so this measures both together", r.MachineCPU*100, r.ClientCPU))
	}
	return notes
}

// CPUTime is the CPU (user and system) this process has used, for the
// other load tools (wsbench); 0 where it is not measured (no getrusage).
func CPUTime() time.Duration { return cpuTime() }
