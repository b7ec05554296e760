// Package pbxsim is a simulated Asterisk 22: a SIP registrar and
// back-to-back user agent on github.com/emiago/sipgo (UDP and TCP on one
// port) and a manager interface on ami.Server, reporting every step of
// every call with the AMI events, headers, channel names
// (PJSIP/201-0000000a), Uniqueid/Linkedid scheme ("<epoch>.<n>") and order
// that a real Asterisk 22 emits for the same call (compare with the
// recordings in ami/testdata and pbxsim/testdata).
//
// What it does: REGISTER with optional digest authentication, contacts with
// expiry; calls between registered extensions as two SIP dialogs (INVITE
// forwarded to the callee's contact, 180/200/ACK/BYE/CANCEL relayed, every
// 2xx ACKed, failures such as 486 mapped to hangup causes); calls from
// unknown users arrive on the trunk; calls to auto-answer numbers or to
// unregistered extensions are answered by the simulator itself; hold by
// re-INVITE or UPDATE, answered with the peer's media description (RTP
// flows between the phones) and RFC 3264 o= versioning; blind transfer by
// Redirect, BlindTransfer or a phone's REFER; attended transfer by Atxfer
// through a Local channel pair; directed pickup (**<exten>, PickupChan);
// ChanSpy's events; call forwarding (CF, CFB, CFU) and DND from AstDB as
// FreePBX's dialplan honours them; voicemail for Config.Mailboxes, also
// dialled directly (vmu<ext>, *<ext>)
// (MessageWaiting, MailboxCount, ...); ConfBridge room 1000 on 800 and its
// actions; parking 701-720; the queue with static
// and dynamic members; the status actions (CoreShowChannels, QueueStatus,
// QueueSummary, PJSIPShowEndpoint, ...). Config.Plan "freepbx" adds
// FreePBX/NethVoice's topologies (plan_freepbx.go): ring groups and a
// queue whose members ring through Local channel pairs (local.go,
// fork.go, queue_local.go; kept up to the end as /n asks, or optimised
// away), with Park and Atxfer of a call through such a pair
// (local_park.go, local_xfer.go), a user's second device, voicemail
// when none of them answers, an outbound route to a simulated carrier
// (outbound.go), and dialplan recording by the AstDB's policies
// (record_freepbx.go). Phone is a small sipgo user agent
// that registers, calls, answers and transfers, for tests and demos; it
// answers at once, without ringing, an INVITE that asks it to
// auto-answer (an Originate's PJSIP_HEADER: autoanswer.go).
//
// What it deliberately does not do: send, mix or relay RTP; conference
// rooms other than 1000; voicemail menus; queue announcements and penalties; VarSet/RTCP
// events, and Newexten but VoiceMail's. A parked call that times out is hung up instead of calling the
// parker back. docs/pbxsim.md has the details.
//
// Concurrency: New binds the sockets; Run serves until its context ends,
// then hangs up every call (BYE to each leg) and waits for every goroutine
// it started. Each call is one goroutine (an actor) owning its channels;
// SIP handlers and AMI actions post events to it. All state is guarded by
// one mutex under which events are broadcast, so the AMI stream is a
// consistent history. All exported methods are safe for concurrent use.
package pbxsim
