package synthpbx

import "slices"

func sortChans(cs []*Chan) {
	slices.SortFunc(cs, func(a, b *Chan) int { return a.Seq - b.Seq })
}

// sortCalls orders calls by their first channel's creation.
func sortCalls(cs []*Call) {
	slices.SortFunc(cs, func(a, b *Call) int { return a.first() - b.first() })
}

func (c *Call) first() int {
	if len(c.live) == 0 {
		return 0
	}
	return c.live[0].Seq
}
