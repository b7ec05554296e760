package calls

import "github.com/ctibridge/ctibridge/ami"

// An event's name is turned into an evCode once, by a perfect hash of a
// few of its bytes and one string compare: apply dispatches on the code
// (a jump table, where a switch on the name is a search of string
// compares), and Stats.ByType's counter of a named event is found by it
// without a map lookup (Engine.count).

// evCode numbers the events apply handles, and the frequent ones it
// ignores; evOther is any other name.
type evCode uint8

const (
	evOther evCode = iota
	evNewchannel
	evNewstate
	evNewCallerid
	evNewConnectedLine
	evNewAccountCode
	evDialBegin
	evDialState
	evDialEnd
	evBridgeCreate
	evBridgeEnter
	evBridgeLeave
	evBridgeDestroy
	evBridgeMerge
	evHangup
	evHangupRequest
	evSoftHangupRequest
	evHold
	evUnhold
	evMixMonitorStart
	evMixMonitorStop
	evMixMonitorMute
	evPickup
	evBlindTransfer
	evAttendedTransfer
	evChanSpyStart
	evChanSpyStop
	evOriginateResponse
	evLocalBridge
	evLocalOptimizationBegin
	evLocalOptimizationEnd
	evConfbridgeStart
	evConfbridgeEnd
	evConfbridgeJoin
	evConfbridgeLeave
	evConfbridgeList
	evConfbridgeListRooms
	evConfbridgeMute
	evConfbridgeUnmute
	evConfbridgeTalking
	evConfbridgeLock
	evConfbridgeUnlock
	evCoreShowChannel
	evExtensionStatus
	evDeviceStateChange
	evContactStatus
	evContactStatusDetail
	evContactList
	evPeerStatus
	evEndpointList
	evEndpointDetail
	evRegistry
	evDBGetResponse
	evDBGetTreeResponse
	evMessageWaiting
	evVoicemailUserEntry
	evQueueParams
	evQueueMember
	evQueueMemberStatus
	evQueueMemberAdded
	evQueueMemberRemoved
	evQueueMemberPause
	evQueueMemberPaused
	evQueueEntry
	evQueueCallerJoin
	evQueueCallerLeave
	evQueueCallerAbandon
	evAgentCalled
	evAgentConnect
	evAgentComplete
	evParkedCall
	evUnParkedCall
	evParkedCallGiveUp
	evParkedCallTimeOut
	evParkedCallSwap
	evParkinglot
	// Frequent events that change nothing shown: a code finds their
	// counters.
	evNewexten
	evVarSet
	evMusicOnHoldStart
	evMusicOnHoldStop
	evDTMFBegin
	evDTMFEnd
	evRTCPSent
	evRTCPReceived
	evCdr
	nEvCodes
)

// evNames is each code's event name.
var evNames = [nEvCodes]string{
	evNewchannel:             ami.EventNewchannel,
	evNewstate:               ami.EventNewstate,
	evNewCallerid:            ami.EventNewCallerid,
	evNewConnectedLine:       ami.EventNewConnectedLine,
	evNewAccountCode:         ami.EventNewAccountCode,
	evDialBegin:              ami.EventDialBegin,
	evDialState:              ami.EventDialState,
	evDialEnd:                ami.EventDialEnd,
	evBridgeCreate:           ami.EventBridgeCreate,
	evBridgeEnter:            ami.EventBridgeEnter,
	evBridgeLeave:            ami.EventBridgeLeave,
	evBridgeDestroy:          ami.EventBridgeDestroy,
	evBridgeMerge:            ami.EventBridgeMerge,
	evHangup:                 ami.EventHangup,
	evHangupRequest:          ami.EventHangupRequest,
	evSoftHangupRequest:      ami.EventSoftHangupRequest,
	evHold:                   ami.EventHold,
	evUnhold:                 ami.EventUnhold,
	evMixMonitorStart:        ami.EventMixMonitorStart,
	evMixMonitorStop:         ami.EventMixMonitorStop,
	evMixMonitorMute:         ami.EventMixMonitorMute,
	evPickup:                 ami.EventPickup,
	evBlindTransfer:          ami.EventBlindTransfer,
	evAttendedTransfer:       ami.EventAttendedTransfer,
	evChanSpyStart:           ami.EventChanSpyStart,
	evChanSpyStop:            ami.EventChanSpyStop,
	evOriginateResponse:      ami.EventOriginateResponse,
	evLocalBridge:            ami.EventLocalBridge,
	evLocalOptimizationBegin: ami.EventLocalOptimizationBegin,
	evLocalOptimizationEnd:   ami.EventLocalOptimizationEnd,
	evConfbridgeStart:        ami.EventConfbridgeStart,
	evConfbridgeEnd:          ami.EventConfbridgeEnd,
	evConfbridgeJoin:         ami.EventConfbridgeJoin,
	evConfbridgeLeave:        ami.EventConfbridgeLeave,
	evConfbridgeList:         ami.EventConfbridgeList,
	evConfbridgeListRooms:    ami.EventConfbridgeListRooms,
	evConfbridgeMute:         ami.EventConfbridgeMute,
	evConfbridgeUnmute:       ami.EventConfbridgeUnmute,
	evConfbridgeTalking:      ami.EventConfbridgeTalking,
	evConfbridgeLock:         ami.EventConfbridgeLock,
	evConfbridgeUnlock:       ami.EventConfbridgeUnlock,
	evCoreShowChannel:        ami.EventCoreShowChannel,
	evExtensionStatus:        ami.EventExtensionStatus,
	evDeviceStateChange:      ami.EventDeviceStateChange,
	evContactStatus:          ami.EventContactStatus,
	evContactStatusDetail:    ami.EventContactStatusDetail,
	evContactList:            ami.EventContactList,
	evPeerStatus:             ami.EventPeerStatus,
	evEndpointList:           ami.EventEndpointList,
	evEndpointDetail:         ami.EventEndpointDetail,
	evRegistry:               ami.EventRegistry,
	evDBGetResponse:          ami.EventDBGetResponse,
	evDBGetTreeResponse:      ami.EventDBGetTreeResponse,
	evMessageWaiting:         ami.EventMessageWaiting,
	evVoicemailUserEntry:     ami.EventVoicemailUserEntry,
	evQueueParams:            ami.EventQueueParams,
	evQueueMember:            ami.EventQueueMember,
	evQueueMemberStatus:      ami.EventQueueMemberStatus,
	evQueueMemberAdded:       ami.EventQueueMemberAdded,
	evQueueMemberRemoved:     ami.EventQueueMemberRemoved,
	evQueueMemberPause:       ami.EventQueueMemberPause,
	evQueueMemberPaused:      ami.EventQueueMemberPaused,
	evQueueEntry:             ami.EventQueueEntry,
	evQueueCallerJoin:        ami.EventQueueCallerJoin,
	evQueueCallerLeave:       ami.EventQueueCallerLeave,
	evQueueCallerAbandon:     ami.EventQueueCallerAbandon,
	evAgentCalled:            ami.EventAgentCalled,
	evAgentConnect:           ami.EventAgentConnect,
	evAgentComplete:          ami.EventAgentComplete,
	evParkedCall:             ami.EventParkedCall,
	evUnParkedCall:           ami.EventUnParkedCall,
	evParkedCallGiveUp:       ami.EventParkedCallGiveUp,
	evParkedCallTimeOut:      ami.EventParkedCallTimeOut,
	evParkedCallSwap:         ami.EventParkedCallSwap,
	evParkinglot:             ami.EventParkinglot,
	evNewexten:               ami.EventNewexten,
	evVarSet:                 ami.EventVarSet,
	evMusicOnHoldStart:       ami.EventMusicOnHoldStart,
	evMusicOnHoldStop:        ami.EventMusicOnHoldStop,
	evDTMFBegin:              "DTMFBegin",
	evDTMFEnd:                ami.EventDTMFEnd,
	evRTCPSent:               "RTCPSent",
	evRTCPReceived:           "RTCPReceived",
	evCdr:                    ami.EventCdr,
}

// evBits is the size of the hash's table: 2^evBits slots for some 85
// names, sparse enough that a seed without collisions comes quickly.
const evBits = 11

// evTable and evSeed are the perfect hash: evTable[evHash(name, evSeed)]
// is name's code if name is one of evNames.
var (
	evSeed  uint32
	evTable [1 << evBits]evCode
)

func init() { evSeed = buildEvTable(&evTable) }

// evHash mixes a name's length and five of its bytes (n >= 2).
func evHash(s string, seed uint32) uint32 {
	n := len(s)
	x := uint32(n) | uint32(s[n-1])<<8 | uint32(s[n-2])<<16 | uint32(s[n/2])<<24
	y := uint32(s[1]) | uint32(s[n/3])<<8 | uint32(s[2*n/3])<<16
	v := (x ^ y*0x9E3779B1) * seed
	v ^= v >> 15
	v *= 0x2C1B3C6D
	return v >> (32 - evBits)
}

// buildEvTable finds the first seed under which evNames' hashes are
// distinct, fills t with it and returns it. It panics if none is found
// (two names the sampled bytes cannot tell apart): TestEvCodes runs it.
func buildEvTable(t *[1 << evBits]evCode) uint32 {
	for seed := uint32(1); seed < 1<<20; seed += 2 {
		clear(t[:])
		ok := true
		for c := evOther + 1; c < nEvCodes && ok; c++ {
			h := evHash(evNames[c], seed)
			ok = t[h] == evOther
			t[h] = c
		}
		if ok {
			return seed
		}
	}
	panic("calls: no seed hashes the event names apart")
}

// evCodeOf is the code of an event's name, evOther for names not in
// evNames (compared in full: the hash only picks the candidate).
func evCodeOf(name string) evCode {
	if len(name) < 2 {
		return evOther
	}
	if c := evTable[evHash(name, evSeed)]; evNames[c] == name {
		return c
	}
	return evOther
}
