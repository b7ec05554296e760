// Package nethcti is the REST half of the NethCTI drop-in: NethVoice's own
// clients (the NethVoice CTI web app, the phone-island widget, NethLink)
// talk to ctibridge at the paths and in the shapes they use with
// nethcti-middleware and nethcti-server, beside ctibridge's own API, which
// it does not change (docs/nethcti-compat.md is the migration guide).
//
// Front is an http.Handler for two prefixes: /api/... (nethcti-middleware:
// "Authorization: Bearer <JWT>") and /webrest/... (nethcti-server's
// legacy scheme: "Authorization: <user>:<token>"). Each route says where
// it is served (routes.go).
//
// Logins (login.go) are the native login, served in process by the rest
// handler (Config.API, POST /auth/login): the same users, directories,
// profiles, login limits, refusal log and metrics. POST /api/login answers
// a JWT (HS256 over crypto/hmac, jwt.go: nethcti-middleware's claims id,
// 2fa, otp_verified, profile_id, iat, exp) holding the native session's
// token sealed (AES-GCM, key derived from Config.Secret), so its expiry,
// revocation and survival of a restart are the native session's. The
// legacy nonce login answers 401 "WWW-Authenticate: Digest <nonce>"; the
// token is nethcti-server's HMAC-SHA1(password, "user:password:nonce") in
// hex, mapped in memory to the session. Persistent tokens (phone-island's,
// the mobile app's, NethLink's: /tokens/persistent/{audience}, the
// phone_island_token_* routes, a legacy login with "auth-exp: no-exp") are
// rows of the Store, their SHA-256 only (creds.go).
//
// Every other route acts for the user its credential names: the native
// handler serves it (rest.AsUser), with its permissions, privacy classes,
// ETags and errors. What the front adds: /user/me, /user/endpoints/all,
// /astproxy/opgroups and the profile's macro_permissions in NethCTI's
// shape (user.go, profile.go: the only map between ctibridge's
// capabilities and NethCTI's permissions); settings and the default
// device in the Store, and NethLink's heartbeat (nethlink.go: POST and
// GET /user/nethlink, the setting "nethlink"); /user/all as
// /user/endpoints/all; /astproxy/feature_codes from Config.FeatureCodes
// (DefaultFeatureCodes: audio_test *41); /astproxy/queue_astats from
// the live queues' members (queuestats.go), the queue manager's reads of
// queue_log history 501; /user/paramurl and /streaming/sources answered
// {} (ctibridge has no parameterized URL and no video source); "username" on every extension of the extension
// reads and chSource/chDest on their conversations, NethCTI's names in
// the queue and parking reads (reads.go, shapes.go over package
// nethcti/shape, which the socket shares: made once per state
// version, view and users set, and served from memory); /history/calls
// and the phonebook's lists (history.go, phonebook.go; the web app's
// person and company views and visibility filters: pbviews.go);
// NethCTI's action bodies read leniently and put in the native bodies
// (actions.go), and the actions the native API has no route for: dtmf
// (AMI PlayDTMF), mute and unmute (AMI MuteAudio), hangup_mainexten and
// cancel (native hangups), and answer, toggle_hold and toggle_mute
// through a desk phone's action URL (phones.go: a per-vendor table by
// user agent, sent through pooled upstream clients), or 501 with the
// reason when the device has none. No route answers 200 without acting.
//
// For a socket front (socket.io, package nethcti/sio) the package exports
// the credential checks and the extension owners:
//   - Front.CheckToken(username, token) checks a socket login's
//     {accessKeyId, token}: a JWT of the front (login or persistent) or a
//     legacy token; Front.CheckJWT and Front.CheckLegacy check one kind.
//     They return an Identity: the ctibridge user (*auth.User, whose
//     auth.View filters what the socket may see), the native session token
//     (Identity.Session; auth.Service.OnRevoke(Session, f) tells when it
//     ends; "" for a persistent token) and a persistent token's audience.
//     Errors: ErrBadToken, or a transient one (the sessions or the
//     persistent tokens still being read after a restart).
//   - Front.Username(exten) is the user name of the user owning an
//     extension ("" if none), as the reads' "username".
//
// Concurrency: a Front is safe for concurrent use; its mutable state is
// the credentials' maps, the reads' cache (replaced entries, never
// edited) and the users map of the latest users set.
package nethcti
