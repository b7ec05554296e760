package calls

// tombstones remembers the Uniqueids of the last hung-up channels, so that
// a late list item or a duplicated event cannot resurrect them.
type tombstones struct {
	set  map[string]struct{}
	ring []string
	next int
}

func newTombstones(n int) tombstones {
	return tombstones{set: make(map[string]struct{}, n), ring: make([]string, n)}
}

func (t *tombstones) add(uid string) {
	if uid == "" {
		return
	}
	// One lookup for "already there?" and the insert: the set grows
	// when uid is new.
	n := len(t.set)
	if t.set[uid] = struct{}{}; len(t.set) == n {
		return
	}
	if old := t.ring[t.next]; old != "" {
		delete(t.set, old) // not uid: the ring's uids are in the set
	}
	t.ring[t.next] = uid
	t.next = (t.next + 1) % len(t.ring)
}

func (t *tombstones) has(uid string) bool {
	_, ok := t.set[uid]
	return ok
}
