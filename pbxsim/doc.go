// Package pbxsim is a simulated Asterisk 22: a SIP registrar and
// back-to-back user agent on github.com/emiago/sipgo (UDP and TCP on one
// port) and a manager interface on ami.Server, reporting every step of
// every call with the AMI events, headers, channel names
// (PJSIP/201-0000000a), Uniqueid/Linkedid scheme ("<epoch>.<n>") and order
// that a real Asterisk 22 emits for the same call (compare with the
// recordings in ami/testdata).
//
// What it does: REGISTER with optional digest authentication, contacts with
// expiry (ContactStatus, PeerStatus, ExtensionStatus, DeviceStateChange);
// calls between registered extensions as two SIP dialogs (INVITE forwarded
// to the callee's contact, 180/200/ACK/BYE/CANCEL relayed, failures such as
// 486 mapped to hangup causes); calls from unknown users arrive on the trunk
// (PJSIP/trunk-..., context from-trunk); calls to auto-answer numbers or to
// unregistered extensions are answered by the simulator itself; hold by
// re-INVITE (Hold, MusicOnHoldStart); parking 701-720; a queue that rings
// its free, unpaused members (ringall or rrmemory) with app_queue's events
// and statistics; the AMI actions CoreShowChannels, ExtensionStateList,
// ExtensionState, DeviceStateList, PJSIPShowEndpoints, PJSIPShowContacts,
// QueueStatus, ParkedCalls, Parkinglots, CoreStatus, Originate, Hangup,
// Redirect, BlindTransfer, Park, QueuePause, DBPut/DBGet/DBDel (an
// in-memory AstDB), Setvar of DEVICE_STATE(Custom:...) and
// MixMonitor/StopMixMonitor/MixMonitorMute (events only). Phone is a small
// sipgo user agent that registers, calls and answers, for tests and demos.
// docs/pbxsim.md lists the events of each feature.
//
// What it deliberately does not do: media (SDP is passed between the two
// sides, no RTP is sent or relayed, nothing is recorded), dynamic queue
// members (QueueAdd/QueueRemove), queue announcements and penalties,
// conferences, attended transfer, Local channels, VarSet/Newexten/RTCP
// events, authentication of INVITEs other than from extensions when a
// secret is set. A parked call that times out is hung up instead of
// calling the parker back.
//
// Concurrency: New binds the sockets; Run serves until its context ends and
// waits for every goroutine it started. Each call is one goroutine (an
// actor) owning its channels; SIP handlers and AMI actions post events to
// it. All state is guarded by one mutex under which events are broadcast,
// so the AMI stream is a consistent history. All exported methods are safe
// for concurrent use.
package pbxsim
