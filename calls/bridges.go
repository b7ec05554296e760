package calls

import "github.com/ctibridge/ctibridge/ami"

// Bridges: who is in which Asterisk bridge. Entering a talking bridge with
// somebody else is what answers a conversation; holding bridges (parking,
// music on hold) connect nobody.

// bridge is an Asterisk bridge.
type bridge struct {
	id      string
	holding bool // parking lot or holding bridge: nobody talks to anybody
	conf    bool // a ConfBridge conference (softmix)
	members []*channel
}

func (b *bridge) remove(c *channel) {
	for i, m := range b.members {
		if m == c {
			b.members = append(b.members[:i], b.members[i+1:]...)
			return
		}
	}
}

// bridgeTypeKeys are what a bridge's kind is told by: BridgeTechnology,
// BridgeType.
var bridgeTypeKeys = ami.NewKeySet("BridgeTechnology", "BridgeType")

func (e *Engine) ensureBridge(id string, m ami.Message) *bridge {
	b := e.bridges[id]
	if b == nil {
		var h [2]string
		m.Read(bridgeTypeKeys, h[:])
		b = &bridge{id: id, holding: h[0] == "holding_bridge" || h[1] == "parking", conf: h[0] == "softmix"}
		e.bridges[id] = b
	}
	return b
}

func (e *Engine) onBridgeCreate(m ami.Message) {
	if id := m.Get("BridgeUniqueid"); id != "" {
		e.ensureBridge(id, m)
	}
}

// joinBridge puts c into b; entering a talking bridge with somebody else
// is what answers a conversation.
func (e *Engine) joinBridge(c *channel, b *bridge) {
	if c.bridge == b {
		return
	}
	e.leaveBridge(c)
	c.bridge = b
	b.members = append(b.members, c)
	if !b.holding && len(b.members) > 1 {
		now := e.nowMs()
		for _, x := range b.members {
			if x.answeredAt == 0 {
				x.answeredAt = now
			}
			e.changed(x)
		}
	}
	e.changed(c)
}

func (e *Engine) onBridgeEnter(m ami.Message) {
	h := readHdrs(m, bridgeKeys)
	c := e.chanOfHdrs(&h)
	id := h.v[hBridgeUniqueid]
	if c == nil || id == "" {
		return
	}
	e.updateFrom(c, &h)
	b := e.ensureBridge(id, m)
	swap := h.v[hSwapUniqueid]
	if swap != "" {
		// c replaces a Local half (optimisation): the half leaves the bridge.
		if s := e.chans[swap]; s != nil && s.bridge == b {
			e.leaveBridge(s)
			s.bridgeAt = e.resync.events
			e.changed(s)
		}
	}
	c.bridgeAt = e.resync.events
	e.joinBridge(c, b)
	e.noteBridgeMove(c, b, swap != "")
}

func (e *Engine) onBridgeLeave(m ami.Message) {
	h := readHdrs(m, bridgeKeys)
	c := e.chanOfHdrs(&h)
	if c == nil {
		return
	}
	e.updateFrom(c, &h)
	c.bridgeAt = e.resync.events
	if c.bridge != nil && c.bridge.id == h.v[hBridgeUniqueid] {
		for _, x := range c.bridge.members {
			e.changed(x)
		}
		c.bridge.remove(c)
		c.noteBridgeLeave(c.bridge)
		c.bridge = nil
	}
}

func (e *Engine) onBridgeDestroy(m ami.Message) {
	id := m.Get("BridgeUniqueid")
	b := e.bridges[id]
	if b == nil {
		return
	}
	for _, x := range b.members {
		x.bridge = nil
		x.bridgeAt = e.resync.events
		e.changed(x)
	}
	delete(e.bridges, id)
}

func (e *Engine) onBridgeMerge(m ami.Message) {
	from, to := e.bridges[m.Get("FromBridgeUniqueid")], e.bridges[m.Get("ToBridgeUniqueid")]
	if from == nil || to == nil || from == to {
		return
	}
	for _, x := range append([]*channel(nil), from.members...) {
		x.bridgeAt = e.resync.events
		e.joinBridge(x, to)
	}
}
