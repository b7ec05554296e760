package wsbench

import (
	"bufio"
	"bytes"
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/ctibridge/ctibridge/loadtest"
	"github.com/ctibridge/ctibridge/loadtest/internal/wsframe"
)

// rings follows, for the clients of one reader worker, which extensions
// each client's screen shows ringing, and records when a screen starts
// showing one ringing (an extenUpdate whose status is ringing or
// busy_ringing after one that was not): with -stamps, each such moment
// is matched afterwards to the time the call was placed on the PBX
// (`ctibridge-lab loadtest synth --serve-ami --stamps`), so the latency is
// the call's first AMI event to the screen, through every hop between,
// with the clock of this machine at both ends. Only the worker that owns
// the clients touches it.
type rings struct {
	ringing map[uint64]struct{} // client id << 32 | extension number: shown ringing
	recs    []ringRec
}

// ringRec is one screen starting to show an extension ringing.
type ringRec struct {
	exten uint32
	at    int64 // Unix ns, read time
}

func newRings() *rings { return &rings{ringing: map[uint64]struct{}{}} }

// observe reads the head of client id's event (op event) and records a
// start of ringing when record is set; the state is followed either way.
func (r *rings) observe(id int, head []byte, now int64, record bool) {
	if !bytes.Contains(head[:min(len(head), 64)], []byte(`"type":"extenUpdate"`)) {
		return
	}
	x := wsframe.UintField(head, `"exten":"`)
	if x == 0 || x > 1<<32-1 {
		return
	}
	k := uint64(id)<<32 | x
	if !isRinging(head) {
		delete(r.ringing, k)
		return
	}
	if _, ok := r.ringing[k]; ok {
		return
	}
	r.ringing[k] = struct{}{}
	if record {
		r.recs = append(r.recs, ringRec{exten: uint32(x), at: now})
	}
}

// isRinging says whether the head's status is ringing or busy_ringing.
func isRinging(head []byte) bool {
	switch string(wsframe.Field(head, `"status":"`)) {
	case "ringing", "busy_ringing":
		return true
	}
	return false
}

// stamps are the calls' start times by callee, ascending.
type stamps map[uint32][]int64

// readStamps reads "<callee> <Unix ns>" lines; a last line without its
// newline (being written) is left out.
func readStamps(r io.Reader) (stamps, error) {
	s := stamps{}
	br := bufio.NewReader(r)
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		x, t, ok := bytes.Cut(bytes.TrimSpace(line), []byte(" "))
		xn, err1 := strconv.ParseUint(string(x), 10, 32)
		tn, err2 := strconv.ParseInt(string(t), 10, 64)
		if !ok || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("stamps line %d: %q is not \"<callee> <Unix ns>\"", n, bytes.TrimSpace(line))
		}
		s[uint32(xn)] = append(s[uint32(xn)], tn)
	}
	for _, ts := range s {
		slices.Sort(ts)
	}
	return s, nil
}

// ringResult is the ringing latencies of a run.
type ringResult struct {
	latency   loadtest.Histogram
	unmatched int // screens ringing with no call placed before (a ringing from before the stamps)
	// expected and seen count, for the calls placed in the window, one
	// per client: a call no client saw is missing from every screen.
	expected, seen int
	calls          map[callKey][]time.Duration // per call, its screens' latencies (when not nil)
}

// callKey names a call: its callee and stamp.
type callKey struct {
	exten uint32
	stamp int64
}

// match times each recorded ringing from the latest stamp of its
// extension before it. The calls placed in [from, to) are expected on
// each of clients screens; to should leave the slowest screen time to
// show the last ones.
func (s stamps) match(recs []ringRec, clients int, from, to int64, out *ringResult) {
	for _, r := range recs {
		ts := s[r.exten]
		i, _ := slices.BinarySearch(ts, r.at+1) // the first stamp after r.at
		if i == 0 {
			out.unmatched++
			continue
		}
		st := ts[i-1]
		out.latency.Record(time.Duration(r.at - st))
		if out.calls != nil {
			k := callKey{r.exten, st}
			out.calls[k] = append(out.calls[k], time.Duration(r.at-st))
		}
		if st >= from && st < to {
			out.seen++
		}
	}
	for _, ts := range s {
		for _, t := range ts {
			if t >= from && t < to {
				out.expected += clients
			}
		}
	}
}

// writeCalls writes one line per call, in stamp order: "<callee>
// <stamp ns> <screens> <median µs> <max µs>", so that two paths' files
// pair up by their first two fields (bench/edges.sh).
func (rr *ringResult) writeCalls(w io.Writer) error {
	keys := slices.SortedFunc(maps.Keys(rr.calls), func(a, b callKey) int {
		return cmp.Or(cmp.Compare(a.stamp, b.stamp), cmp.Compare(a.exten, b.exten))
	})
	bw := bufio.NewWriter(w)
	for _, k := range keys {
		ds := rr.calls[k]
		slices.Sort(ds)
		fmt.Fprintf(bw, "%d %d %d %d %d\n", k.exten, k.stamp, len(ds), ds[(len(ds)-1)/2].Microseconds(), ds[len(ds)-1].Microseconds())
	}
	return bw.Flush()
}
