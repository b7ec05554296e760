package calls

import (
	"strings"

	"github.com/ctibridge/ctibridge/ami"
)

// trunkState is what the engine keeps about a trunk besides its channels.
type trunkState struct {
	name         string
	status       string
	statusAt     uint64 // resyncState.events when a live device state last set status
	registration string
	chanType     string
	chans        []*channel
	conv         trunkConvs // its conversations as last published, and what to re-derive (trunkconvs.go)
}

func (e *Engine) ensureTrunk(name string) *trunkState {
	t := e.trunks[name]
	if t == nil {
		t = &trunkState{name: strings.Clone(name), status: "unmonitored", registration: "unmonitored"}
		e.trunks[t.name] = t
	}
	e.dirtyTrunk[t.name] = struct{}{}
	return t
}

// trunkStatus maps an extension-style status to the trunk vocabulary.
func trunkStatus(st string) string {
	switch st {
	case "online":
		return "online"
	case "offline":
		return "offline"
	case "":
		return "unmonitored"
	}
	return "busy"
}

// onRegistry handles outbound registration events. Asterisk names the
// registration, not the endpoint; we match a trunk by that name or by the
// username part of "Username: trunk@host"-style values.
func (e *Engine) onRegistry(m ami.Message) {
	var t *trunkState
	for _, k := range [...]string{"Registration", "Username", "Domain"} {
		v := m.Get(k)
		if i := strings.IndexByte(v, '@'); i >= 0 {
			v = v[:i]
		}
		if v != "" && e.classify(v) == ownerTrunk {
			t = e.ensureTrunk(v)
			break
		}
	}
	if t == nil {
		return
	}
	switch strings.ToLower(m.Get("Status")) {
	case "registered":
		t.registration = "registered"
	case "rejected", "failed":
		t.registration = "rejected"
	case "unregistered":
		t.registration = "unregistered"
	}
}
