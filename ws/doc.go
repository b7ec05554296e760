// Package ws serves the live state to CTI clients over WebSocket (GET
// /ws): a snapshot tagged with the feed's seq, then every change as a
// seq-numbered event, filtered per client by the same permission view as
// REST (auth.View), with resume from the engine's feed after a reconnect.
// A client is closed with 4003 when its token expires and, when the
// Authenticator is also a Revoker (auth.Service), at once when its session
// is revoked (revoke.go). The protocol is in docs/websocket.md.
//
// How it goes fast: every change is framed once per visibility class (the
// engine's bytes of calls.Full or calls.NumbersHidden: Change.JSON), as a
// complete WebSocket frame shared by all its recipients; snapshots are
// the engine's collection bytes of the client's class (snapshot.go).
// A trunk's or a queue's change, for the clients that take it whole
// (trunkUpdate or queueUpdate, not "deltas"), is one frame per class
// holding the engine's bytes of the entity (calls.Change.Whole) uncopied,
// a few bytes around them, shared by both classes when their bytes are
// the same; the clients taking deltas get every one, never coalesced.
// The resumes the hub serves in one pass (replay.go) share the frames of
// the changes they replay the same way, so a reconnect storm frames each
// change once per class, not once per client.
// A client's frames go out as soon as its socket is free. The fan-out,
// and whatever else queues a frame (a reply, a snapshot, a close), hands
// the client to one of GOMAXPROCS writer goroutines, each owning a share
// of the clients, which write each one's queue with one non-blocking
// writev of the shared frames (direct.go, on Unix systems): no goroutine,
// timer, deadline or buffer per client per change. What a socket does not
// take at once (a client behind, a snapshot larger than the socket's
// buffer), and every write to a connection that is not plain TCP (TLS),
// or any at all off Unix, go to the client's flusher goroutine, started
// for it, which writes the rest and everything queued since in one
// writev, waiting for the socket, again while more was queued during that
// write, and ends when the queue is empty (writer.go). No write carries a
// deadline: a write that has waited for a full socket longer than
// Config.SlowTimeout has its connection dropped by the hub's watchdog
// (watchdog.go). Under load the hub
// batches across all clients: past Config.WriteRate client wake-ups a
// second, changes wait in the feed and go out together. The frames are
// written and read by this package (frame.go, read.go), not by
// gorilla/websocket, which handles only the upgrade.
//
// How an idle client costs little: its frames are read exactly (a
// header, then its payload, never a byte beyond), so between two messages
// nothing of the client's is in memory, and on Linux a plain TCP
// connection then waits in the hub's epoll set with no goroutine (park.go);
// the poller starts a reader when the client's next bytes arrive, and a
// close or a failure starts one at once. TLS connections, and every
// connection elsewhere, keep a reader goroutine blocked in a read.
//
// How it stays exact without letting a slow client hold back the rest:
// a client's queue keeps at most the latest update per entity (a newer
// one replaces the queued one, so its seq may skip but its state stays
// true); a queue that still overflows is replaced by a fresh snapshot; a
// client that cannot take its frames within Config.SlowTimeout is closed
// with 4008 (or dropped, if a write was stuck half-way).
//
// How no client can starve the others with what it sends: a subscribe
// replaces what the previous subscription still has queued (never two
// snapshots), a client has at most one subscribe on its way to the hub,
// replies (pong, renewed) are coalesced, a resume costs at most one frame
// per entity, and every message or control frame a client sends is
// charged to its own token bucket (Config.ClientRate, ClientBurst; a
// subscribe five times): past it the client is closed with 4008. What a
// client sends is read into a buffer borrowed for that message, at most
// 4 KiB.
//
// What it does not do: it never writes to the engine, it does not send
// AMI actions (clients use REST for those), and it does not compress
// (permessage-deflate would cost a compression per client per message).
//
// Several PBXs (pbx.go): a subscribe may name the PBXs it wants ("pbxs"),
// and a user may be limited to some (auth.User.PBXs); the others'
// entities are left out of the client's snapshots and events; what is
// left is in the client's class, as for any client (the snapshot's
// collections picked by calls.Snapshot.CollectionWhere). Its link status
// (snapshot and pbxStatus) names its PBXs' links only, and another PBX's
// link change is not sent to it.
//
// A bus node's own say (LocalState: it cannot hear its stream, then it
// hears it again) is a snapshot to every client, or, to a client that
// asked for status deltas ("deltas":["status"]), a pbxStatus at its seq
// taking none, kept true by the rules of unheard.go.
//
// Concurrency: one goroutine (Hub.Run) reads the feed and queues frames;
// it never blocks on a client. Each connection has a reader goroutine,
// which ServeHTTP starts once the connection is upgraded (so that
// net/http's per-request buffers go) and Hub.Close waits for, at most
// one at a time: it ends when the connection parks, and the poller starts
// the next; and, while a write to it is waiting for its socket, a flusher
// goroutine; the last reader waits for both the flusher and a writer
// goroutine holding the connection before it ends. The writer goroutines,
// the watchdog's and the poller run while Run does; before Run and after
// it, writes go to flushers. The engine never
// blocks on the hub: the hub reads the feed at its own pace, and if it
// fell a whole feed behind it would resend snapshots. Client is the
// matching Go client, safe for one reader and one writer at a time.
package ws
