package calls

import "github.com/ctibridge/ctibridge/ami"

// Every channel event carries its channel's snapshot block (Uniqueid,
// Channel, ChannelState, caller ID, connected line, ...; a dial event the
// dialled channel's too, prefixed Dest). A handler reads it in one pass
// over the event's headers (ami.KeySet) into a chanHdrs, instead of a Get
// per header: finding the channel, creating it and refreshing it all read
// from there.

// Indexes of chanHdrs.v: the channel block, then what dial and bridge
// events add.
const (
	hUniqueid = iota
	hChannel
	hChannelState
	hCallerIDNum
	hCallerIDName
	hConnectedLineNum
	hConnectedLineName
	hLinkedid
	hExten
	hAccountCode
	hContext
	nChanKeys
)

const (
	hDestUniqueid = nChanKeys + iota
	hDestChannel
	hDestChannelState
	hDialStatus
	nDialKeys
)

// In bridgeKeys.
const (
	hBridgeUniqueid = nChanKeys + iota
	hSwapUniqueid   // BridgeEnter's: the Local half c replaces
)

var chanBlock = []string{"Uniqueid", "Channel", "ChannelState", "CallerIDNum", "CallerIDName",
	"ConnectedLineNum", "ConnectedLineName", "Linkedid", "Exten", "AccountCode", "Context"}

var (
	chanKeys   = ami.NewKeySet(chanBlock...)
	dialKeys   = ami.NewKeySet(append(chanBlock[:nChanKeys:nChanKeys], "DestUniqueid", "DestChannel", "DestChannelState", "DialStatus")...)
	bridgeKeys = ami.NewKeySet(append(chanBlock[:nChanKeys:nChanKeys], "BridgeUniqueid", "SwapUniqueid")...)
)

// chanHdrs is what a Read of one of the key sets above found in an event.
type chanHdrs struct {
	v     [nDialKeys]string
	found uint64 // bit i: v[i]'s header is present
}

// readHdrs reads m's headers of ks (chanKeys, dialKeys or bridgeKeys).
func readHdrs(m ami.Message, ks *ami.KeySet) chanHdrs {
	var h chanHdrs
	h.found = m.Read(ks, h.v[:])
	return h
}

func (h *chanHdrs) has(i int) bool { return h.found&(1<<i) != 0 }

// chanOfHdrs is chanOf from headers read.
func (e *Engine) chanOfHdrs(h *chanHdrs) *channel {
	c := e.chanBy(h.v[hUniqueid], h.v[hChannel])
	if c == nil {
		e.stats.Unknown++
	}
	return c
}
