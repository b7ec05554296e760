package calls

import "github.com/ctibridge/ctibridge/ami"

// An event's name is turned into an evCode once, by a map lookup: apply
// dispatches on the code (a jump table, where a switch on the name is a
// search of string compares), and Stats.ByType's counter of a named event
// is found by it without a second lookup (Engine.count).

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

// evByName is evNames inverted.
var evByName = func() map[string]evCode {
	m := make(map[string]evCode, nEvCodes)
	for c := evOther + 1; c < nEvCodes; c++ {
		m[evNames[c]] = c
	}
	return m
}()

// evCodeOf is the code of an event's name, evOther for names not in
// evNames.
func evCodeOf(name string) evCode { return evByName[name] }
