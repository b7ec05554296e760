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

func containsChan(s []*channel, c *channel) bool {
	for _, x := range s {
		if x == c {
			return true
		}
	}
	return false
}
