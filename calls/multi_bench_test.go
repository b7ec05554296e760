package calls

import (
	"strconv"
	"testing"

	"github.com/ctibridge/ctibridge/ami"
)

// ami64 is one batch of 64 events.
type ami64 = []ami.Message

func batches(msgs []ami.Message) []ami64 {
	var out []ami64
	for len(msgs) >= 64 {
		out, msgs = append(out, msgs[:64]), msgs[64:]
	}
	return out
}

// BenchmarkMultiPublish: one batch of 64 events (calls ending and
// starting) applied and published, on one engine of 5,000 extensions with
// 2,000 calls up, and on one of two engines of 2,500 extensions with
// 1,000 calls each, merged by a Multi (Sync after each Publish, the two
// PBXs in turn). The difference is the combiner's cost per publish.
func BenchmarkMultiPublish(b *testing.B) {
	for _, pbxs := range []int{1, 2} {
		b.Run(strconv.Itoa(pbxs)+"x"+strconv.Itoa(5000/pbxs), func(b *testing.B) {
			var engs []*Engine
			var gens []*scalePBX
			var srcs []Source
			names := []string{"", "site2"}[:pbxs]
			for range pbxs {
				e, s := scaleEngine(b, 5000/pbxs, 2000/pbxs)
				engs, gens, srcs = append(engs, e), append(gens, s), append(srcs, e)
			}
			var m *Multi
			if pbxs > 1 {
				m = NewMulti(0, names, srcs)
			}
			streams := make([][]ami64, pbxs)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				p := i % pbxs
				i++
				if len(streams[p]) == 0 {
					b.StopTimer()
					streams[p] = batches(gens[p].stream(1 << 14))
					b.StartTimer()
				}
				for _, msg := range streams[p][0] {
					engs[p].Apply(msg)
				}
				streams[p] = streams[p][1:]
				engs[p].Publish()
				if m != nil {
					m.Sync(p)
				}
			}
		})
	}
}
