package ami_test

import (
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"unicode"

	"github.com/ctibridge/ctibridge/ami"
)

// checkRead says where m.Read(ks) differs from Lookup of each key.
func checkRead(t *testing.T, m ami.Message, keys []string) {
	t.Helper()
	ks := ami.NewKeySet(keys...)
	vals := make([]string, len(keys)+1)
	for i := range keys {
		vals[i] = "stale" // a previous Read's
	}
	vals[len(keys)] = "beyond"
	found := m.Read(ks, vals)
	for i, k := range keys {
		v, ok := m.Lookup(k)
		if vals[i] != v || (found&(1<<i) != 0) != ok {
			t.Errorf("Read of %q in %v: %q, %v; Lookup: %q, %v", k, m, vals[i], found&(1<<i) != 0, v, ok)
		}
	}
	if found>>len(keys) != 0 || vals[len(keys)] != "beyond" {
		t.Errorf("Read of %d keys set bits %b or value %q beyond them", len(keys), found, vals[len(keys)])
	}
}

func TestReadIsLookup(t *testing.T) {
	m := ami.NewMessage(
		ami.Header{Key: "Event", Value: "Newstate"}, ami.Header{Key: "Context", Value: "from-internal"},
		ami.Header{Key: "Channel", Value: "PJSIP/201-00000001"}, ami.Header{Key: "uniqueid", Value: "lower"},
		ami.Header{Key: "Uniqueid", Value: "1"}, ami.Header{Key: "Linkedid", Value: "2"}, ami.Header{Key: "Uniqueid", Value: "3"},
		ami.Header{Key: "", Value: "empty key"}, ami.Header{Key: "X", Value: "one byte"}, ami.Header{Key: "Exten", Value: ""},
		ami.Header{Key: "LINKEDID", Value: "upper"}, ami.Header{Key: "caller_id", Value: "under"},
	)
	checkRead(t, m, []string{"Channel", "Linkedid", "Uniqueid", "Context", "X", "Exten", "Extens", "Missing", "Caller_ID"})
	checkRead(t, m, []string{"UNIQUEID", "context", "x", "linkedID"})
	checkRead(t, ami.Message{}, []string{"Channel"})
	// A key of other runes folding to a set's key comes first when it
	// comes first (K, U+212A KELVIN SIGN, is k), and after an exact one.
	kelvin := ami.NewMessage(ami.Header{Key: "Event", Value: "X"}, ami.Header{Key: "\u212Aey", Value: "kelvin"},
		ami.Header{Key: "KEY", Value: "upper"}, ami.Header{Key: "Channel", Value: "c"})
	checkRead(t, kelvin, []string{"Key", "Channel", "Missing"})
	checkRead(t, kelvin, []string{"KEY", "channel"})
	checkRead(t, kelvin, []string{"key"})
}

// TestReadIsLookupRandom compares Read with Lookup on messages of keys
// drawn from a few names in mixed case, repeated, with a Kelvin sign now
// and then, and sets drawn from the same names.
func TestReadIsLookupRandom(t *testing.T) {
	names := []string{"Channel", "Context", "Uniqueid", "Linkedid", "Exten", "CallerIDNum", "DestChannel", "Dest", "X", "Key"}
	r := rand.New(rand.NewPCG(1, 2))
	mixCase := func(s string) string {
		out := flipCase(r, s, 4)
		if r.IntN(20) == 0 {
			out = strings.Replace(out, "k", "\u212A", 1)
			out = strings.Replace(out, "K", "\u212A", 1)
		}
		if r.IntN(20) == 0 {
			out = strings.Replace(out, "s", "\u017F", 1)
		}
		return out
	}
	for range 3000 {
		var hs []ami.Header
		for j := range r.IntN(12) {
			k := names[r.IntN(len(names))]
			if r.IntN(2) == 0 {
				k = mixCase(k)
			}
			hs = append(hs, ami.Header{Key: k, Value: string(rune('a' + j))})
		}
		var keys []string
		for _, i := range r.Perm(len(names))[:1+r.IntN(len(names))] {
			keys = append(keys, names[i])
		}
		checkRead(t, ami.NewMessage(hs...), keys)
		if t.Failed() {
			return
		}
	}
}

// TestFoldsToASCII holds what Read's slow way rests on: of the runes
// beyond ASCII, only U+017F and U+212A fold to ASCII ones.
func TestFoldsToASCII(t *testing.T) {
	for r := rune(0x80); r <= unicode.MaxRune; r++ {
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			if f < 0x80 && r != 0x17F && r != 0x212A {
				t.Errorf("%U folds to %q", r, f)
			}
		}
	}
	long := ami.NewMessage(ami.Header{Key: "Event", Value: "X"}, ami.Header{Key: "Deſt", Value: "long s"},
		ami.Header{Key: "DEST", Value: "upper"})
	checkRead(t, long, []string{"Dest", "Missing"})
}

func TestNewKeySetRefuses(t *testing.T) {
	many := make([]string, ami.MaxKeySet+1)
	for i := range many {
		many[i] = "K" + strings.Repeat("x", i)
	}
	ami.NewKeySet(many[:ami.MaxKeySet]...) // the most it takes
	for _, keys := range [][]string{{""}, {"Chan\u212Ael"}, {"Channel", "CHANNEL"}, many} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewKeySet(%d keys %q...) did not panic", len(keys), keys[0])
				}
			}()
			ami.NewKeySet(keys...)
		}()
	}
}

// TestNewMessageAllocs: a message built is its text and its offsets,
// two allocations (the text is not copied once more).
func TestNewMessageAllocs(t *testing.T) {
	hs := []ami.Header{{Key: "Event", Value: "Newstate"}, {Key: "Channel", Value: "PJSIP/201-1"}, {Key: "Uniqueid", Value: "1"}}
	var m ami.Message
	if n := testing.AllocsPerRun(100, func() { m = ami.NewMessage(hs...) }); n != 2 {
		t.Errorf("%.0f allocations, want 2", n)
	}
	if v, _ := m.Lookup("channel"); v != "PJSIP/201-1" || m.Len() != 3 {
		t.Errorf("message %q", m.Headers())
	}
}

// TestReadAllocs: Read writes into the caller's values, substrings of the
// message: nothing to allocate.
func TestReadAllocs(t *testing.T) {
	m := ami.NewMessage(ami.Header{Key: "Event", Value: "Newstate"}, ami.Header{Key: "Channel", Value: "PJSIP/201-1"},
		ami.Header{Key: "uniqueid", Value: "1"})
	ks := ami.NewKeySet("Uniqueid", "Channel", "Missing")
	vals := make([]string, ks.Len())
	if n := testing.AllocsPerRun(100, func() { m.Read(ks, vals) }); n != 0 {
		t.Errorf("Read allocates %.0f times", n)
	}
}

// BenchmarkMessageRead is BenchmarkMessageGet's lookups by one Read each.
func BenchmarkMessageRead(b *testing.B) {
	data, err := os.ReadFile("testdata/basic_call_caller_hangup.ami")
	if err != nil {
		b.Fatal(err)
	}
	msgs := readFrames(b, data)
	ks := ami.NewKeySet("Uniqueid", "Channel", "ChannelState", "CallerIDNum", "CallerIDName",
		"ConnectedLineNum", "ConnectedLineName", "Linkedid", "Exten", "AccountCode", "DestUniqueid")
	vals := make([]string, ks.Len())
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	for range b.N {
		for _, m := range msgs {
			m.Read(ks, vals)
			for _, v := range vals {
				n += len(v)
			}
		}
	}
	if n == 0 {
		b.Fatal("nothing found")
	}
	reportRate(b, ks.Len()*len(msgs), "lookup")
}

// flipCase is s with some ASCII letters' case flipped, each with a chance
// of one in oneIn.
func flipCase(r *rand.Rand, s string, oneIn int) string {
	b := []byte(s)
	for i := range b {
		if r.IntN(oneIn) == 0 && b[i] >= 'a' && b[i] <= 'z' {
			b[i] -= 'a' - 'A'
		} else if r.IntN(oneIn) == 0 && b[i] >= 'A' && b[i] <= 'Z' {
			b[i] += 'a' - 'A'
		}
	}
	return string(b)
}
