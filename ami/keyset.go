package ami

import (
	"fmt"
	"strings"
)

// KeySet is a fixed list of header keys that Message.Read looks up in one
// pass over a message's headers: a handler that reads ten headers of an
// event walks them once, not ten times. Make one per list with NewKeySet,
// at package level; it is never written after, so any goroutine may use it.
type KeySet struct {
	keys []string
	slot [256]uint8 // by slotOf: 1 + index of the first key there, 0 none
	next []uint8    // per key: 1 + index of the next key in its slot, 0 none
}

// MaxKeySet is the most keys a KeySet holds (Read's bits of found keys).
const MaxKeySet = 64

// NewKeySet returns the set of keys, in order: Read fills its values in
// this order. Keys must be non-empty ASCII, distinct under case folding,
// and at most MaxKeySet; NewKeySet panics otherwise (a program's mistake).
func NewKeySet(keys ...string) *KeySet {
	if len(keys) > MaxKeySet {
		panic(fmt.Sprintf("ami: NewKeySet: %d keys, at most %d", len(keys), MaxKeySet))
	}
	ks := &KeySet{keys: append([]string(nil), keys...), next: make([]uint8, len(keys))}
	for i, k := range keys {
		if k == "" || !isASCII(k) {
			panic(fmt.Sprintf("ami: NewKeySet: key %q is empty or not ASCII", k))
		}
		for _, o := range keys[:i] {
			if strings.EqualFold(o, k) {
				panic(fmt.Sprintf("ami: NewKeySet: keys %q and %q are one", o, k))
			}
		}
		// Append to the slot's chain: its keys stay in set order.
		s := slotOf(len(k), k[len(k)-1])
		p := &ks.slot[s]
		for *p != 0 {
			p = &ks.next[*p-1]
		}
		*p = uint8(i + 1)
	}
	return ks
}

// Len is the number of keys.
func (ks *KeySet) Len() int { return len(ks.keys) }

// slotOf places a key by its length and its last byte with ASCII letters'
// case folded, so that a header key equal to a set's key under ASCII case
// folding finds it in the same slot.
func slotOf(n int, last byte) uint8 { return uint8(n*37) ^ (last | 0x20) }

// Read sets vals[i] to what Get would return for ks's key i, for every key,
// and returns the keys present as bits (bit i set: key i is present, as
// Lookup's ok says), walking m's headers once. vals must hold ks.Len()
// values at least. As Get, a key's header of exactly that case comes
// first, then the first one of any case.
func (m Message) Read(ks *KeySet, vals []string) (found uint64) {
	vals = vals[:len(ks.keys)]
	clear(vals)
	var exact uint64
	t, idx := m.text, m.idx
	for i := 0; i+3 < len(idx); i += 4 {
		a, b := int(idx[i]), int(idx[i+1])
		if a == b {
			continue
		}
		k := t[a:b]
		// A header key is equal under case folding to one key of the set
		// at most (the set's keys are distinct so): the first that
		// matches ends the chain.
		for j := ks.slot[slotOf(b-a, t[b-1])]; j != 0; j = ks.next[j-1] {
			key, bit := ks.keys[j-1], uint64(1)<<(j-1)
			if len(key) != len(k) {
				continue
			}
			if k == key {
				if exact&bit == 0 {
					exact |= bit
					found |= bit
					vals[j-1] = t[idx[i+2]:idx[i+3]]
				}
				break
			}
			if strings.EqualFold(k, key) {
				if found&bit == 0 {
					found |= bit
					vals[j-1] = t[idx[i+2]:idx[i+3]]
				}
				break
			}
		}
	}
	if all := uint64(1)<<len(ks.keys) - 1; exact != all && mayFoldToASCII(m.text) {
		// A key of other runes can fold to a set's key while being
		// longer: the walk above missed it, and it may come before the
		// ASCII one it found. Rare: Get's own way for the keys not found
		// in their exact case.
		for j := range ks.keys {
			if exact&(1<<j) == 0 {
				v, ok := m.Lookup(ks.keys[j])
				if vals[j] = v; ok {
					found |= 1 << j // (a key the walk found, Lookup finds)
				}
			}
		}
	}
	return found
}

// mayFoldToASCII reports whether s holds one of the two runes beyond ASCII
// that fold to ASCII letters (U+017F LATIN SMALL LETTER LONG S to s,
// U+212A KELVIN SIGN to k; TestFoldsToASCII checks there are no others):
// only a key holding one can fold to an ASCII key. A message's text holds
// its values too, so a value may say yes: Read then takes the slow way.
func mayFoldToASCII(s string) bool {
	return strings.Contains(s, "\u212A") || strings.Contains(s, "\u017F")
}
