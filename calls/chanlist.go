package calls

// Small helpers on slices of channels (an extension's or trunk's
// channels, a channel's dial targets).

func removeChan(s []*channel, c *channel) []*channel {
	for i, x := range s {
		if x == c {
			s[i] = s[len(s)-1]
			s[len(s)-1] = nil
			return s[:len(s)-1]
		}
	}
	return s
}

// addOwned appends c to its owner's channels s, noting its index.
func addOwned(s []*channel, c *channel) []*channel {
	c.ownerAt = int32(len(s))
	return append(s, c)
}

// removeOwned is removeChan of a channel added by addOwned, found at its
// index rather than by a scan: a trunk has thousands of channels. The
// last one takes its place and index, as in removeChan.
func removeOwned(s []*channel, c *channel) []*channel {
	i := int(c.ownerAt)
	if i >= len(s) || s[i] != c {
		return removeChan(s, c) // not at its index: never, but stay right
	}
	last := s[len(s)-1]
	last.ownerAt = int32(i)
	s[i] = last
	s[len(s)-1] = nil
	return s[:len(s)-1]
}

func containsChan(s []*channel, c *channel) bool {
	for _, x := range s {
		if x == c {
			return true
		}
	}
	return false
}
