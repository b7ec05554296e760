package phonebook

// In-memory search of the public contacts. The Book already loads every
// public contact to build its reverse-lookup Index; it keeps them, sorted
// as the SQL search sorts (name then id, byte order), with a trigram
// posting list per three bytes of their lower-cased text. A search then
// costs tens of microseconds instead of a database round trip that must
// count and sort every match; only the viewer's own private and
// speed-dial contacts still come from SQL, and the two sorted lists are
// merged into the page.
//
// Matching is the SQL path's, on the same strings: the lower-cased name
// and company (searchText) contain the lower-cased term, or the
// normalised numbers (numbersText) contain the normalised term when it
// looks like a number. Substrings of bytes of valid UTF-8 are substrings
// of characters, so LIKE '%term%' (with %, _ and \ escaped) and
// strings.Contains agree; the conformance suite checks every search
// against both paths.

import (
	"cmp"
	"context"
	"slices"
	"sort"
	"strings"
	"time"
)

// memSearch is an immutable snapshot of the public contacts.
type memSearch struct {
	gen  uint64    // Book.gen when the snapshot was read
	cs   []Contact // public contacts by name, then id
	text textIndex // searchText of cs[i]
	nums textIndex // numbersText of cs[i]
}

// textIndex finds the records containing a term.
type textIndex struct {
	buf    string  // the records, each followed by a NUL (never in a record)
	starts []int32 // where record i begins in buf
	tri    map[uint32][]int32
}

func trigram(s string, i int) uint32 {
	return uint32(s[i])<<16 | uint32(s[i+1])<<8 | uint32(s[i+2])
}

func newTextIndex(recs []string) textIndex {
	n := 0
	for _, r := range recs {
		n += len(r) + 1
	}
	var b strings.Builder
	b.Grow(n)
	x := textIndex{starts: make([]int32, len(recs)), tri: make(map[uint32][]int32)}
	for i, r := range recs {
		x.starts[i] = int32(b.Len())
		b.WriteString(r)
		b.WriteByte(0)
		for j := 0; j+3 <= len(r); j++ {
			k := trigram(r, j)
			p := x.tri[k]
			// Records are added in order, so a repeat is at the tail.
			if len(p) == 0 || p[len(p)-1] != int32(i) {
				x.tri[k] = append(p, int32(i))
			}
		}
	}
	x.buf = b.String()
	return x
}

// record returns record i (without its NUL).
func (x *textIndex) record(i int32) string {
	end := len(x.buf) - 1
	if int(i)+1 < len(x.starts) {
		end = int(x.starts[i+1]) - 1
	}
	return x.buf[x.starts[i]:end]
}

// find calls fn, in increasing order, with the records containing term
// (not empty, without NUL).
func (x *textIndex) find(term string, fn func(i int32)) {
	if len(term) < 3 {
		x.scan(term, fn)
		return
	}
	// The shortest posting list of the term's trigrams bounds the
	// candidates; each is then checked whole, unless the term is that
	// trigram.
	var best []int32
	for j := 0; j+3 <= len(term); j++ {
		p := x.tri[trigram(term, j)]
		if len(p) == 0 {
			return
		}
		if best == nil || len(p) < len(best) {
			best = p
		}
	}
	exact := len(term) == 3
	for _, i := range best {
		if exact || strings.Contains(x.record(i), term) {
			fn(i)
		}
	}
}

// scan finds a term too short for trigrams by searching the whole buffer.
func (x *textIndex) scan(term string, fn func(i int32)) {
	pos := 0
	for pos < len(x.buf) {
		j := strings.Index(x.buf[pos:], term)
		if j < 0 {
			return
		}
		p := int32(pos + j)
		i := int32(sort.Search(len(x.starts), func(k int) bool { return x.starts[k] > p })) - 1
		fn(i)
		if int(i)+1 >= len(x.starts) {
			return
		}
		pos = int(x.starts[i+1])
	}
}

// contactLess is the search order: name, then id, bytewise (the SQL
// path orders by name COLLATE "C" on PostgreSQL, BINARY on SQLite).
func contactLess(a, b *Contact) bool {
	if a.Name != b.Name {
		return a.Name < b.Name
	}
	return a.ID < b.ID
}

func newMemSearch(gen uint64, all []Contact, norm Normalizer) *memSearch {
	cs := make([]Contact, 0, len(all))
	for _, c := range all {
		if c.Type == TypePublic {
			cs = append(cs, c)
		}
	}
	slices.SortFunc(cs, func(a, b Contact) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	text := make([]string, len(cs))
	nums := make([]string, len(cs))
	s := &SQLStore{norm: norm}
	for i := range cs {
		text[i] = searchText(&cs[i])
		nums[i] = s.numbersText(&cs[i])
	}
	return &memSearch{gen: gen, cs: cs, text: newTextIndex(text), nums: newTextIndex(nums)}
}

// match returns how many public contacts match term (already trimmed)
// and the first n of them, in search order.
func (m *memSearch) match(term string, norm Normalizer, n int) (int, []int32) {
	count := 0
	var first []int32
	add := func(i int32) {
		if count < n {
			first = append(first, i)
		}
		count++
	}
	switch {
	case term == "":
		for i := range min(n, len(m.cs)) {
			first = append(first, int32(i))
		}
		return len(m.cs), first
	case strings.IndexByte(term, 0) >= 0:
		return 0, nil // stored text never holds NUL
	}
	lower := strings.ToLower(term)
	num := ""
	if looksLikeNumber(term) {
		num = norm.Normalize(term)
	}
	if num == "" {
		m.text.find(lower, add)
		return count, first
	}
	// Rare (number-like terms) and selective: merge two lists.
	var a, b []int32
	m.text.find(lower, func(i int32) { a = append(a, i) })
	m.nums.find(num, func(i int32) { b = append(b, i) })
	for _, i := range union(a, b) {
		add(i)
	}
	return count, first
}

// union merges two increasing lists without repeats.
func union(a, b []int32) []int32 {
	if len(a) == 0 {
		return b
	}
	if len(b) == 0 {
		return a
	}
	out := make([]int32, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] < b[j]:
			out = append(out, a[i])
			i++
		case a[i] > b[j]:
			out = append(out, b[j])
			j++
		default:
			out = append(out, a[i])
			i, j = i+1, j+1
		}
	}
	out = append(out, a[i:]...)
	return append(out, b[j:]...)
}

// ownSearcher is implemented by stores that can search the viewer's own
// (non-public) contacts alone; Book needs it to search in memory.
type ownSearcher interface {
	// searchOwn returns the first n of viewer's private and speed-dial
	// contacts matching term, in search order, and how many match.
	searchOwn(ctx context.Context, viewer, term string, n int) ([]Contact, int, error)
	// listOwn returns up to max of viewer's private and speed-dial
	// contacts, in search order.
	listOwn(ctx context.Context, viewer string, max int) ([]Contact, error)
}

// maxOwnCached is the most private contacts of one user kept in memory;
// a user with more is searched by SQL.
const maxOwnCached = 2000

// ownContacts is one user's private and speed-dial contacts, loaded for
// a search and reused for Config.OwnTTL while the snapshot stands.
type ownContacts struct {
	mem  *memSearch // the snapshot they were loaded for
	at   time.Time
	cs   []Contact // in search order
	text []string  // searchText
	nums []string  // numbersText
}

func newOwnContacts(m *memSearch, at time.Time, cs []Contact, norm Normalizer) *ownContacts {
	o := &ownContacts{mem: m, at: at, cs: cs, text: make([]string, len(cs)), nums: make([]string, len(cs))}
	s := &SQLStore{norm: norm}
	for i := range cs {
		o.text[i] = searchText(&cs[i])
		o.nums[i] = s.numbersText(&cs[i])
	}
	return o
}

// match is memSearch.match over the user's contacts, by linear scan.
func (o *ownContacts) match(term string, norm Normalizer, n int) ([]Contact, int) {
	if strings.IndexByte(term, 0) >= 0 {
		return nil, 0
	}
	lower := strings.ToLower(term)
	num := ""
	if term != "" && looksLikeNumber(term) {
		num = norm.Normalize(term)
	}
	var first []Contact
	count := 0
	for i := range o.cs {
		if strings.Contains(o.text[i], lower) || (num != "" && strings.Contains(o.nums[i], num)) {
			if count < n {
				first = append(first, o.cs[i])
			}
			count++
		}
	}
	return first, count
}

// search answers q (clamped) from the snapshot m and the viewer's own
// contacts: from mine when not nil, else from own (SQL).
func (m *memSearch) search(ctx context.Context, own ownSearcher, mine *ownContacts, norm Normalizer, q Query) (Page, error) {
	term := strings.TrimSpace(q.Term)
	n := q.Offset + q.Limit
	nPub, pub := m.match(term, norm, n)
	var priv []Contact
	var nPriv int
	if mine != nil {
		priv, nPriv = mine.match(term, norm, n)
	} else {
		var err error
		if priv, nPriv, err = own.searchOwn(ctx, q.Viewer, term, n); err != nil {
			return Page{}, err
		}
	}
	return m.merge(pub, nPub, priv, nPriv, q), nil
}

// merge builds the page q from the first public matches (of nPub) and
// the first private ones (of nPriv), both in search order.
func (m *memSearch) merge(pub []int32, nPub int, priv []Contact, nPriv int, q Query) Page {
	p := Page{Count: nPub + nPriv, Rows: []Contact{}}
	i, j := 0, 0
	for k := 0; k < q.Offset+q.Limit && (i < len(pub) || j < len(priv)); k++ {
		var c *Contact
		if j >= len(priv) || (i < len(pub) && contactLess(&m.cs[pub[i]], &priv[j])) {
			c = &m.cs[pub[i]]
			i++
		} else {
			c = &priv[j]
			j++
		}
		if k >= q.Offset {
			p.Rows = append(p.Rows, *c)
		}
	}
	return p
}
