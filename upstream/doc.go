// Package upstream is a pooled, balancing HTTP client for the remote REST
// services ctibridge can front (a phonebook, call history, customer
// cards): several base URLs of one service, one Client.
//
// Client.Do takes a request whose URL holds only a path and a query and
// sends it to one of the base URLs: the healthy one with the fewest
// outstanding requests (a response counts until its body is closed).
// Connections are kept alive, at most Config.MaxConnsPerHost per server.
// Each attempt waits at most Config.Timeout for the response headers, and
// a body that stalls longer than Config.ReadTimeout between reads is cut.
// Transport errors, timeouts and 502/503/504 answers are failures: a
// server failing Config.EjectAfter times in a row is left out for
// Config.EjectFor, then tried again (one more failure ejects it again).
// Idempotent requests (GET, HEAD, OPTIONS, PUT, DELETE) whose body can be
// replayed are retried on failure, on another server when there is one,
// after a backoff with full jitter; other requests are never retried,
// except after a 401 when the Credentials could renew themselves (the
// server refused the request before acting on it).
//
// Credentials add authentication to every attempt: StaticHeader (a fixed
// header, such as a bearer token) or OAuth2 (an OAuth2 client-credentials
// token, fetched when first needed, cached until shortly before it
// expires, and fetched again after a 401).
//
// The package knows nothing of phonebooks or history: those packages
// declare the small Doer interface that *Client satisfies, and read the
// message of an error answer with ErrorMessage. It uses the
// standard library only. A Client is safe for concurrent use; Close
// releases idle connections.
package upstream
