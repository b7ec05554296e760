// Package rest serves ctibridge's REST API (docs/rest.md): login and
// tokens, reads of the live PBX state, call actions turned into AMI
// actions, the phonebook, call history and customer-card routes (over the
// Phonebook, history.Store and Doer given in Config), and the OpenAPI
// document. It is the API alone: the HTTP server in front of it (timeouts,
// HTTP/2 and h2c, certificate reload, pipelined-response coalescing) is
// package httpserve.
//
// Reads never encode JSON per request: they write the bytes the calls
// engine encoded once per change and visibility class, the class
// auth.View gives the user, with ETag, gzip and a filtered user's
// extensions collection (the hidden collection's pieces with the
// extensions it sees in full put in: calls.Snapshot.ExtensionsFor) made
// once per state version and view (reads.go); nothing here parses or
// rewrites JSON. Actions are
// checked in full (body, permission through auth.Allowed, channels in the
// snapshot) before anything is sent to the PBX (actions.go). Errors become
// statuses in one place (errors.go).
//
// A store error matching sqldb.ErrUnavailable (the database out of reach
// or not yet migrated) is a 503 store_unavailable with Retry-After, not
// logged per request (sqldb.Gate logs the outage). It does not serve the
// WebSocket (package ws, mounted beside it by cmd/ctibridge), nor
// /metrics, /healthz and pprof (package admin, on its own listener), and
// it keeps no data of its own: the stores do. It never locks the engine:
// it reads snapshots.
//
// Several PBXs (sites.go, pbxreads.go): with Config.Sites, State is the
// combined state (calls.Multi); the collections, conversations,
// conferences and the status take ?pbx= and leave out the PBXs a user is
// not limited to (auth.User.PBXs), each entity's bytes of the user's
// class picked (calls.Snapshot.CollectionWhere); such a read's status and
// X-Ctibridge-Stale are those of the PBXs it covers (one entity's read:
// its PBX's). An action is planned against the engine of the PBX its ids
// name and sent through that PBX's client.
//
// A front of the same process serving another API over this one (package
// nethcti, NethCTI's clients) checks its own credentials and hands a
// request over for the user it found (AsUser), so its reads and actions
// are these, with these permissions and privacy; ConvChannels and
// WriteError give it the actions' conversation lookup and the error JSON
// (asuser.go).
//
// Concurrency: the handler is safe for concurrent use; the
// only shared mutable state is the per-version read caches (the ?pbx=
// one too), replaced, never edited, when the snapshot changes.
package rest
