package ws

import (
	"strconv"
	"sync"
	"time"
)

// penalties keep a user closed for flooding (4008 "too many messages")
// from coming straight back: a client that reconnects in a loop after
// each close would otherwise cost the hub a snapshot per reconnect, its
// budget being new with each connection. While a user is in the box, a
// new connection of that user is closed right after authentication,
// before it joins the hub (no hello, no snapshot). The time doubles with
// each flood close that follows within an hour, from penaltyMin to
// penaltyMax. It is per user, not per address, so colleagues behind the
// same NAT are not shut out by one misbehaving client.
type penalties struct {
	mu sync.Mutex
	m  map[string]penalty
}

type penalty struct {
	until time.Time
	next  time.Duration // the box's length at the next flood close
	last  time.Time     // of the last flood close
}

const (
	penaltyMin    = 2 * time.Second
	penaltyMax    = 2 * time.Minute
	penaltyForget = time.Hour
	// maxPenalties bounds the map; past it, entries whose box ended are
	// dropped (flooders are few; users are bounded by the users file).
	maxPenalties = 10000
)

// flooded puts user in the box after a flood close.
func (p *penalties) flooded(user string, now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[string]penalty{}
	}
	e := p.m[user]
	if e.next == 0 || now.Sub(e.last) > penaltyForget {
		e.next = penaltyMin
	}
	d := e.next
	e.until, e.last, e.next = now.Add(d), now, min(2*d, penaltyMax)
	if len(p.m) >= maxPenalties {
		for k, v := range p.m {
			if now.After(v.until) {
				delete(p.m, k)
			}
		}
	}
	if len(p.m) < maxPenalties {
		p.m[user] = e
	}
	return d
}

// left is how long user stays in the box (0: not in it).
func (p *penalties) left(user string, now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e, ok := p.m[user]; ok && now.Before(e.until) {
		return e.until.Sub(now)
	}
	return 0
}

// boxedReason is the close reason a boxed user's new connection gets.
func boxedReason(d time.Duration) string {
	return "too many messages: reconnect in " + strconv.Itoa(int(d.Round(time.Second)/time.Second)+1) + " s"
}
