package calls

import (
	"bytes"
	"testing"
)

// refExtensionsJSON encodes the collection from the single extensions,
// independently of the pieces.
func refExtensionsJSON(s *Snapshot) []byte {
	b := []byte{'{'}
	for i, k := range s.Extensions.Keys() {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k)
		b = append(b, ':')
		b = append(b, s.ExtensionJSON(k)...)
	}
	return append(b, '}')
}

// TestExtensionsPartsReuse checks that the pieces always join into the
// collection, read or not between Publishes, and that a Publish changing a
// few extensions shares every other piece with the last assembled ones.
func TestExtensionsPartsReuse(t *testing.T) {
	e, pbx := scaleEngine(t, 3*extPiece+100, 200)
	prev := e.Snapshot().ExtensionsParts()
	for round := range 40 {
		for _, m := range pbx.stream(8) {
			e.Apply(m)
		}
		s := e.Publish()
		if round%3 == 1 {
			continue // not read: the next assembly reuses an older base
		}
		parts := s.ExtensionsParts()
		if got, want := joinPieces(parts), refExtensionsJSON(s); !bytes.Equal(got, want) {
			t.Fatalf("round %d: pieces join into %d bytes, want %d", round, len(got), len(want))
		}
		if !bytes.Equal(s.ExtensionsJSON(), refExtensionsJSON(s)) {
			t.Fatalf("round %d: ExtensionsJSON differs", round)
		}
		shared := 0
		for i := range min(len(parts), len(prev)) {
			if len(parts[i]) > 0 && len(prev[i]) > 0 && &parts[i][0] == &prev[i][0] {
				shared++
			}
		}
		if len(parts) == len(prev) && shared < len(parts)/2 {
			t.Errorf("round %d: %d of %d pieces shared with the previous read", round, shared, len(parts))
		}
		prev = parts
	}
}

// BenchmarkExtensionsFirstReadAfterChange is the cost of the collection's
// JSON on the first read after one extension changed, at 5,000 extensions
// and 2,000 calls up: one piece re-encoded, the others shared.
func BenchmarkExtensionsFirstReadAfterChange(b *testing.B) {
	e, pbx := scaleEngine(b, 5000, 2000)
	e.Snapshot().ExtensionsParts()
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		for _, m := range pbx.stream(1) {
			e.Apply(m)
		}
		s := e.Publish()
		b.StartTimer()
		s.ExtensionsParts()
	}
}
