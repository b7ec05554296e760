// Package synthpbx is the synthetic Asterisk 22 of `ctibridge-lab
// loadtest synth` and of the engine's benchmarks at call-centre scale: the AMI
// events of a PBX with thousands of extensions (2000, 2001, ...) and a
// mix of calls, without SIP, sockets or goroutines. A PBX emits each
// event to a function as its methods place, answer, transfer and end
// calls; a Gen places a Mix of them on a clock its owner gives (real
// time in loadtest, a virtual one in benchmarks and tests).
//
// The calls and the shapes and order of their events follow the
// recordings of a real Asterisk 22 (calls/testdata and ami/testdata,
// each .md saying what happened); the noise that changes nothing (most
// VarSet and Newexten, DeviceStateChange, RTCP, Cdr) is left out:
//
//   - Internal: A dials B (basic_call_caller_hangup): Newchannel, Dial's
//     Newexten, DialBegin, B Ringing, ExtensionStatus, DialState; on
//     answer DialEnd, Newstate, a basic bridge both enter; at the end
//     both leave, the bridge is destroyed, both hang up.
//   - TrunkIn: an outside caller on PJSIP/trunk-... for a DID sent to
//     from-internal (inbound_trunk_did). TrunkOut: A dials out through
//     the trunk; no recording has one, so it is the inbound shape the
//     other way round (the trunk's leg shows the number dialled).
//   - QueueCall: an outside caller answered and put into a ringall queue
//     of static members (queue_answered): QueueCallerJoin, one direct
//     PJSIP leg per idle member with AgentCalled and DialBegin, each
//     member's ExtensionStatus and QueueMemberStatus as it rings; the
//     first answers, the others are hung up "Answered elsewhere" (cause
//     26), QueueCallerLeave, AgentConnect, a bridge; at the end
//     AgentComplete and the member's QueueMemberStatus with CallsTaken
//     one more. A caller hung up while waiting abandons
//     (QueueCallerAbandon).
//   - Blind: AMI Redirect of A (blind_transfer_redirect): the bridge
//     breaks, B is hung up, A's channel dials C.
//   - Attended: Atxfer by A (atxfer_complete): Hold, B held in the
//     original bridge, A in a consult bridge with a Local pair whose ;2
//     dials C; when A hangs up, BridgeMerge, AttendedTransfer, and the
//     Local pair optimises away (LocalOptimizationBegin/End), leaving C
//     in the original bridge with B.
//   - Forward: an outside caller on the trunk for the DID of an extension
//     whose calls are forwarded unconditionally to an outside number
//     (AstDB CF/<ext>, call_forward_astdb: the Dial in the caller's own
//     dialplan, no Local channel, the extension never rung and its hint
//     idle, the callee's leg showing the extension dialled as its Exten),
//     dialled out on the trunk as TrunkOut: both legs are
//     PJSIP/trunk-..., one bridge. No recording has this call whole; it
//     is inbound_trunk_did's caller with call_forward_astdb's forward.
//
// Queue members are the first extensions, queue by queue, and take only
// queue calls; the other calls use the others. Announce emits what a
// bridge that did not resynchronise needs (every extension idle and
// reachable, every member's state); loadtest's SynthAMI answers a
// resync's lists from Chans, Status and Queues instead.
package synthpbx
