// Package sio serves NethCTI's socket.io to NethCTI's own clients
// (phone-island, the NethVoice CTI web app, NethLink): engine.io 4 over
// the websocket transport only, at /api/ws and /socket.io (Paths), as
// nethcti-server did. The framing, the engine.io pings and the acks are
// github.com/zishang520/socket.io's; this package adds the protocol the
// clients speak and the events they read, projected from the engine's
// feed.
//
// The protocol (nethcti-server's com_nethcti_ws): the client emits login
// {accessKeyId, token, uaType} and gets authe_ok {message}, or 401
// {message} and the server's disconnect (a bad body, a uaType other than
// mobile or desktop, a token the Authenticator refuses). Who checks the
// token is the Authenticator's business: it returns a Login (the user,
// the token's expiry, the native session it stands on). NativeLogin takes
// ctibridge's own tokens; ctibridge's --nethcti wires one over the NethCTI
// REST front's credentials (its JWT, the legacy user:token, persistent
// tokens). A second login of the same user with the same uaType tells the
// first client takeOver and goes on at its takeOverAck, or after
// Config.TakeOverWait (8 s, NethCTI's). ping with an ack is acknowledged.
// A client whose token expires, or whose session is revoked (Revoker, on
// Login.Session), is told 401 and disconnected.
//
// The events (project.go), to each logged-in client, filtered as /ws
// filters them (the same auth.View, so the same bytes per class):
//   - extenUpdate: every extension's change, in NethCTI's shape
//     (shape.go: "username", the user the Directory names; chSource and
//     chDest on each conversation), the calls of an extension the user
//     may not see with their numbers hidden;
//   - queueUpdate (a queue whole, also for a member delta),
//     queueMemberUpdate, parkingUpdate: hidden unless the user sees the
//     calls no extension owns; with NethCTI's names added as the REST
//     front's reads add them (package nethcti/shape, shared: a queue's
//     counters and service level, its members' and waiting callers'
//     fields, a free space's parkedCaller {}, a parked caller's seconds
//     left when the change is sent);
//   - confBridgeUpdate to the clients who see unowned calls or have a
//     member on their extensions (the others' members blanked), and
//     confBridgeEnd to those told of the room when it ends;
//   - what an extension's change implies, told by comparing it with the
//     one before (projector): extenHangup {callerNum, channelExten,
//     cause} to its owners for each conversation that ended (cause.go:
//     NethCTI's name of the cause of its channel's Hangup, which the
//     engine's change carries in Change.Hangups), before the
//     update that drops it; extenConnected {extenConnected} to its owners
//     for each conversation answered; userMainPresenceUpdate
//     {mainPresence:{username,status}} to everyone when a user's main
//     presence (calls.MainPresenceOf of its first extension) changed;
//     newVoiceMessageCounter {voicemail, counter} to everyone when a
//     mailbox's new count changed;
//   - what another part of the server tells one user (Server.ToUser):
//     updateDefaultDevice, the extension the REST front's POST
//     /user/default_device set.
//
// A conversation that ended without its channel's Hangup (a resync) has
// the cause normal_clearing. A user limited to some PBXs gets only their entities.
// Nothing is sent at login (NethCTI's clients read the state over REST
// after authe_ok). A client is filed for the events before its authe_ok
// is sent, so every change made once it has authe_ok reaches it (one
// made just before may come just before authe_ok); a server that fell a whole feed behind tells every
// client serverReloaded, on which the clients read it again.
//
// How it fans out: each event is encoded once per class (the socket.io
// packet, and the engine.io message as one websocket frame, a gorilla
// PreparedMessage made once: sharedFrame) and queued on each recipient's
// engine socket, uncopied (packet.go). The server's websocket transport
// is the library's but for its writes (transport.go): the library's
// makes a frame of a pre-encoded message for each socket it writes it
// to; ours writes the shared one, each connection's writes in order on
// its own queue as the library's are. An event skips the engine socket
// (its packet, buffer, flush and events) and goes straight to that queue
// when the socket has nothing waiting (the transport writable); else it
// takes the socket's path, behind what waits there. Run is one goroutine reading the
// feed; it never blocks on a client (the writes are queued), but neither
// does it bound what a client that reads slowly has queued: engine.io's
// ping timeout is what drops a client that stopped reading.
package sio
