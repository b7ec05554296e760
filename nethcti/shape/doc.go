// Package shape is NethCTI's small shapes over ctibridge's native queue
// and parking JSON, shared by the REST front (package nethcti: its
// queue and parking reads) and the socket (package nethcti/sio: its
// queueUpdate, queueMemberUpdate and parkingUpdate), so that both give
// one shape. The native fields stay; NethCTI's names are added beside
// them (the web app's queue view reads waitingTime and the counters by
// their NethCTI names; its parking view a free space as {} and the
// seconds left):
//
//   - queue (Queue): completedCallsCount, abandonedCallsCount,
//     avgHoldTime, avgTalkTime, serviceLevelTimePeriod,
//     serviceLevelPercentage (completedInServiceLevel / completed, as
//     app_queue's ServicelevelPerf: "%.1f");
//   - queue member (Member, also each of a queue's): queue,
//     callsTakenCount, lastPausedInReason;
//   - waiting caller (each of a queue's): queue, id (the channel),
//     waitingTime (ms when waiting began, the native waitingSince);
//   - parking (Parking): parkedCaller {} when free; a parked caller's
//     parking and timeout, the seconds left before it returns (the
//     space's timeout less the time parked, at least 0) at the time
//     given.
//
// Numbers are kept exact (Decode uses json.Number).
package shape
