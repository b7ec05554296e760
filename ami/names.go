package ami

// Event names, spelt as Asterisk 22 sends them in the "Event" header, so
// `m.Event() == ami.EventHangup` and `case ami.EventNewchannel:` compile
// with no conversion and cost what a literal costs. TestEventNames checks
// each value against the recordings in testdata.
const (
	// Channels.
	EventNewchannel             = "Newchannel"             // a channel was created
	EventNewstate               = "Newstate"               // a channel's state changed (Ring, Ringing, Up ...)
	EventNewCallerid            = "NewCallerid"            // a channel's caller ID changed
	EventNewConnectedLine       = "NewConnectedLine"       // a channel's connected line (the other party) changed
	EventNewAccountCode         = "NewAccountCode"         // a channel's account code changed
	EventNewexten               = "Newexten"               // a channel moved to a dialplan priority
	EventVarSet                 = "VarSet"                 // a channel variable was set
	EventHangup                 = "Hangup"                 // a channel is gone
	EventHangupRequest          = "HangupRequest"          // a hangup was asked of a channel
	EventSoftHangupRequest      = "SoftHangupRequest"      // a soft hangup was asked of a channel
	EventDialBegin              = "DialBegin"              // a dial towards a channel started
	EventDialState              = "DialState"              // a dialled channel progressed (ringing ...)
	EventDialEnd                = "DialEnd"                // a dial ended, with its DialStatus
	EventHold                   = "Hold"                   // a channel put its peer on hold
	EventUnhold                 = "Unhold"                 // a channel took its peer off hold
	EventMusicOnHoldStart       = "MusicOnHoldStart"       // a channel hears music on hold
	EventMusicOnHoldStop        = "MusicOnHoldStop"        // a channel stopped hearing music on hold
	EventDTMFEnd                = "DTMFEnd"                // a DTMF digit ended
	EventMixMonitorStart        = "MixMonitorStart"        // a recording of a channel started
	EventMixMonitorStop         = "MixMonitorStop"         // a recording of a channel stopped
	EventMixMonitorMute         = "MixMonitorMute"         // a recording was muted or unmuted
	EventPickup                 = "Pickup"                 // a ringing channel was picked up by another
	EventChanSpyStart           = "ChanSpyStart"           // a channel started listening to another
	EventChanSpyStop            = "ChanSpyStop"            // a channel stopped listening to another
	EventOriginateResponse      = "OriginateResponse"      // the outcome of an asynchronous Originate
	EventLocalBridge            = "LocalBridge"            // the two halves of a Local channel were joined
	EventLocalOptimizationBegin = "LocalOptimizationBegin" // a Local channel pair starts optimising itself away
	EventLocalOptimizationEnd   = "LocalOptimizationEnd"   // a Local channel pair finished optimising itself away
	EventUserEvent              = "UserEvent"              // an event raised by the dialplan (UserEvent application)
	EventCdr                    = "Cdr"                    // a call detail record (cdr_manager)

	// Bridges and transfers.
	EventBridgeCreate     = "BridgeCreate"     // a bridge was created
	EventBridgeEnter      = "BridgeEnter"      // a channel entered a bridge
	EventBridgeLeave      = "BridgeLeave"      // a channel left a bridge
	EventBridgeDestroy    = "BridgeDestroy"    // a bridge was destroyed
	EventBridgeMerge      = "BridgeMerge"      // one bridge's channels moved into another
	EventBlindTransfer    = "BlindTransfer"    // a blind transfer happened
	EventAttendedTransfer = "AttendedTransfer" // an attended transfer happened

	// ConfBridge.
	EventConfbridgeStart             = "ConfbridgeStart"             // a conference began (first user in)
	EventConfbridgeEnd               = "ConfbridgeEnd"               // a conference ended (last user out)
	EventConfbridgeJoin              = "ConfbridgeJoin"              // a user joined a conference
	EventConfbridgeLeave             = "ConfbridgeLeave"             // a user left a conference
	EventConfbridgeList              = "ConfbridgeList"              // one user, an item of the ConfbridgeList action
	EventConfbridgeListComplete      = "ConfbridgeListComplete"      // end of ConfbridgeList
	EventConfbridgeListRooms         = "ConfbridgeListRooms"         // one room, an item of the ConfbridgeListRooms action
	EventConfbridgeListRoomsComplete = "ConfbridgeListRoomsComplete" // end of ConfbridgeListRooms
	EventConfbridgeMute              = "ConfbridgeMute"              // a user was muted
	EventConfbridgeUnmute            = "ConfbridgeUnmute"            // a user was unmuted
	EventConfbridgeTalking           = "ConfbridgeTalking"           // a user started or stopped talking
	EventConfbridgeLock              = "ConfbridgeLock"              // a conference was locked
	EventConfbridgeUnlock            = "ConfbridgeUnlock"            // a conference was unlocked

	// Lists of channels.
	EventCoreShowChannel          = "CoreShowChannel"          // one channel, an item of CoreShowChannels
	EventCoreShowChannelsComplete = "CoreShowChannelsComplete" // end of CoreShowChannels

	// Extensions, devices, endpoints.
	EventExtensionStatus            = "ExtensionStatus"            // a hint's state changed, or an item of ExtensionStateList
	EventExtensionStateListComplete = "ExtensionStateListComplete" // end of ExtensionStateList
	EventDeviceStateChange          = "DeviceStateChange"          // a device's state changed, or an item of DeviceStateList
	EventDeviceStateListComplete    = "DeviceStateListComplete"    // end of DeviceStateList
	EventContactStatus              = "ContactStatus"              // a PJSIP contact was added, removed, became (un)reachable
	EventContactStatusDetail        = "ContactStatusDetail"        // a contact of PJSIPShowEndpoint
	EventContactList                = "ContactList"                // one contact, an item of PJSIPShowContacts
	EventContactListComplete        = "ContactListComplete"        // end of PJSIPShowContacts
	EventAorDetail                  = "AorDetail"                  // an AOR of PJSIPShowEndpoint
	EventPeerStatus                 = "PeerStatus"                 // an endpoint (chan_pjsip or chan_sip peer) changed state
	EventEndpointList               = "EndpointList"               // one endpoint, an item of PJSIPShowEndpoints
	EventEndpointListComplete       = "EndpointListComplete"       // end of PJSIPShowEndpoints
	EventEndpointDetail             = "EndpointDetail"             // the endpoint of PJSIPShowEndpoint
	EventEndpointDetailComplete     = "EndpointDetailComplete"     // end of PJSIPShowEndpoint
	EventRegistry                   = "Registry"                   // an outbound registration (a trunk) changed state
	EventDBGetResponse              = "DBGetResponse"              // the value of DBGet
	EventDBGetComplete              = "DBGetComplete"              // end of DBGet
	EventDBGetTreeResponse          = "DBGetTreeResponse"          // one key of DBGetTree
	EventDBGetTreeComplete          = "DBGetTreeComplete"          // end of DBGetTree
	EventMessageWaiting             = "MessageWaiting"             // a mailbox's message counts changed
	EventVoicemailUserEntry         = "VoicemailUserEntry"         // one mailbox, an item of VoicemailUsersList
	EventVoicemailUserEntryComplete = "VoicemailUserEntryComplete" // end of VoicemailUsersList

	// Queues.
	EventQueueParams          = "QueueParams"          // a queue's figures, an item of QueueStatus
	EventQueueMember          = "QueueMember"          // a member, an item of QueueStatus
	EventQueueMemberStatus    = "QueueMemberStatus"    // a member's state changed
	EventQueueMemberAdded     = "QueueMemberAdded"     // a member was added
	EventQueueMemberRemoved   = "QueueMemberRemoved"   // a member was removed
	EventQueueMemberPause     = "QueueMemberPause"     // a member was paused or unpaused
	EventQueueMemberPaused    = "QueueMemberPaused"    // QueueMemberPause before Asterisk 12
	EventQueueEntry           = "QueueEntry"           // a waiting caller, an item of QueueStatus
	EventQueueStatusComplete  = "QueueStatusComplete"  // end of QueueStatus
	EventQueueSummary         = "QueueSummary"         // one queue, an item of QueueSummary
	EventQueueSummaryComplete = "QueueSummaryComplete" // end of QueueSummary
	EventQueueCallerJoin      = "QueueCallerJoin"      // a caller entered a queue
	EventQueueCallerLeave     = "QueueCallerLeave"     // a caller left a queue (answered or not)
	EventQueueCallerAbandon   = "QueueCallerAbandon"   // a caller hung up while waiting
	EventAgentCalled          = "AgentCalled"          // a queue rings a member
	EventAgentConnect         = "AgentConnect"         // a member answered a queue call
	EventAgentComplete        = "AgentComplete"        // a member's queue call ended
	EventAgentRingNoAnswer    = "AgentRingNoAnswer"    // a member did not answer a queue call

	// Parking.
	EventParkedCall          = "ParkedCall"          // a call was parked, or an item of ParkedCalls
	EventUnParkedCall        = "UnParkedCall"        // a parked call was retrieved
	EventParkedCallGiveUp    = "ParkedCallGiveUp"    // a parked caller hung up
	EventParkedCallTimeOut   = "ParkedCallTimeOut"   // a parked call timed out
	EventParkedCallSwap      = "ParkedCallSwap"      // another channel took a parked call's place
	EventParkedCallsComplete = "ParkedCallsComplete" // end of ParkedCalls
	EventParkinglot          = "Parkinglot"          // one lot, an item of Parkinglots
	EventParkinglotsComplete = "ParkinglotsComplete" // end of Parkinglots

	// The system.
	EventFullyBooted = "FullyBooted" // Asterisk finished starting (also sent after login)
	EventShutdown    = "Shutdown"    // Asterisk is stopping or restarting
)

// Action names, spelt as Asterisk 22's manager expects them in the "Action"
// header (it matches them without regard to case; these are the spellings
// of its documentation).
const (
	// Sessions.
	ActionLogin     = "Login"     // authenticate (Secret, or Key after Challenge)
	ActionChallenge = "Challenge" // get a challenge for an MD5 login
	ActionLogoff    = "Logoff"    // end the session
	ActionPing      = "Ping"      // keep-alive

	// Calls.
	ActionOriginate      = "Originate"      // place a call
	ActionHangup         = "Hangup"         // hang up a channel
	ActionRedirect       = "Redirect"       // send a channel (and optionally its peer) elsewhere in the dialplan
	ActionAtxfer         = "Atxfer"         // start an attended transfer
	ActionBlindTransfer  = "BlindTransfer"  // blind-transfer a channel
	ActionPark           = "Park"           // park a channel
	ActionSetvar         = "Setvar"         // set a channel or global variable
	ActionMixMonitor     = "MixMonitor"     // start recording a channel
	ActionStopMixMonitor = "StopMixMonitor" // stop recording a channel
	ActionMixMonitorMute = "MixMonitorMute" // mute or unmute a recording

	// Lists and state.
	ActionCoreShowChannels   = "CoreShowChannels"   // list the channels
	ActionCoreStatus         = "CoreStatus"         // the core's status
	ActionExtensionState     = "ExtensionState"     // the state of one hint
	ActionExtensionStateList = "ExtensionStateList" // list the hints' states
	ActionDeviceStateList    = "DeviceStateList"    // list the devices' states
	ActionPJSIPShowEndpoints = "PJSIPShowEndpoints" // list the PJSIP endpoints
	ActionPJSIPShowEndpoint  = "PJSIPShowEndpoint"  // one PJSIP endpoint in detail
	ActionPJSIPShowContacts  = "PJSIPShowContacts"  // list the PJSIP contacts
	ActionMailboxCount       = "MailboxCount"       // a mailbox's message counts
	ActionMailboxStatus      = "MailboxStatus"      // a mailbox's waiting messages
	ActionVoicemailUsersList = "VoicemailUsersList" // list the mailboxes

	// AstDB.
	ActionDBGet     = "DBGet"     // read one key
	ActionDBGetTree = "DBGetTree" // read a family (Asterisk 18 and later)
	ActionDBPut     = "DBPut"     // write one key
	ActionDBDel     = "DBDel"     // delete one key

	// Queues and parking.
	ActionQueueStatus  = "QueueStatus"  // list queues, members and waiting callers
	ActionQueueSummary = "QueueSummary" // the queues' counters
	ActionQueueAdd     = "QueueAdd"     // add a member
	ActionQueueRemove  = "QueueRemove"  // remove a member
	ActionQueuePause   = "QueuePause"   // pause or unpause a member
	ActionParkedCalls  = "ParkedCalls"  // list the parked calls
	ActionParkinglots  = "Parkinglots"  // list the parking lots

	// ConfBridge.
	ActionConfbridgeList      = "ConfbridgeList"      // list a conference's users
	ActionConfbridgeListRooms = "ConfbridgeListRooms" // list the conferences
	ActionConfbridgeKick      = "ConfbridgeKick"      // remove a user from a conference
	ActionConfbridgeMute      = "ConfbridgeMute"      // mute a user
	ActionConfbridgeUnmute    = "ConfbridgeUnmute"    // unmute a user
	ActionConfbridgeLock      = "ConfbridgeLock"      // lock a conference: nobody else may join
	ActionConfbridgeUnlock    = "ConfbridgeUnlock"    // unlock a conference
)
