package phonebook

import "sync/atomic"

// Index answers "whose number is this" from memory: a map from normal
// form to display name, replaced whole on refresh (readers never lock).
// Lookup answers from the public contacts, which every user may see;
// LookupFor answers for one user, her own private and speed-dial contacts
// first (SetPrivate; Book fills them for Config.Owners). When several
// share a number the oldest (lowest id) wins.
type Index struct {
	norm Normalizer
	m    atomic.Pointer[map[string]string]
	priv atomic.Pointer[map[string]map[string]string] // owner → normal form → name
}

// LookupFor returns the name user knows number by: her own contact's,
// else the public one's, else "". It does not block and does not
// allocate; safe from any goroutine.
func (x *Index) LookupFor(user, number string) string {
	if n := x.LookupOwn(user, number); n != "" {
		return n
	}
	return x.Lookup(number)
}

// LookupOwn returns the name of user's own (private or speed-dial)
// contact with number, or "".
func (x *Index) LookupOwn(user, number string) string {
	p := x.priv.Load()
	if p == nil || user == "" {
		return ""
	}
	own := (*p)[user]
	if own == nil {
		return ""
	}
	var buf [maxNumber + 1]byte
	k := x.norm.append(buf[:0], number)
	if len(k) == 0 {
		return ""
	}
	return own[string(k)]
}

// SetPrivate replaces the users' own contacts the index knows: for each
// user, her private and speed-dial contacts (others are ignored).
func (x *Index) SetPrivate(byUser map[string][]Contact) {
	m := make(map[string]map[string]string, len(byUser))
	for u, cs := range byUser {
		b := builder{norm: x.norm, m: map[string]string{}}
		for _, c := range cs {
			if c.Type != TypePublic && c.OwnerID == u {
				b.add(c)
			}
		}
		if len(b.m) > 0 {
			m[u] = b.m
		}
	}
	x.priv.Store(&m)
}

// NewIndex returns an empty index normalising with n.
func NewIndex(n Normalizer) *Index { return &Index{norm: n} }

// Lookup returns the name for number, or "". It does not block and does
// not allocate, so it can serve as calls.Config.NameLookup. Safe from any
// goroutine.
func (x *Index) Lookup(number string) string {
	var buf [maxNumber + 1]byte
	k := x.norm.append(buf[:0], number)
	if len(k) == 0 {
		return ""
	}
	m := x.m.Load()
	if m == nil {
		return ""
	}
	return (*m)[string(k)]
}

// Len is the number of distinct numbers indexed.
func (x *Index) Len() int {
	if m := x.m.Load(); m != nil {
		return len(*m)
	}
	return 0
}

// builder collects contacts for a new map.
type builder struct {
	norm Normalizer
	m    map[string]string
}

func (b *builder) add(c Contact) {
	name := c.DisplayName()
	if name == "" {
		return
	}
	for _, n := range c.Numbers() {
		if k := b.norm.Normalize(n); k != "" {
			if _, ok := b.m[k]; !ok {
				b.m[k] = name
			}
		}
	}
}

// Set replaces the index's contents with the public contacts of cs.
func (x *Index) Set(cs []Contact) {
	b := builder{norm: x.norm, m: make(map[string]string, len(cs))}
	for _, c := range cs {
		if c.Type == TypePublic {
			b.add(c)
		}
	}
	x.m.Store(&b.m)
}
