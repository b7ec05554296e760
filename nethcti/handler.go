package nethcti

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/rest"
)

// Config configures New. Auth, API, State and Secret are required.
type Config struct {
	// Auth is the bridge's login service: the same users, sessions,
	// login limits and revocations as the native API.
	Auth *auth.Service
	// API is the native REST handler (rest.NewHandler): reads, actions,
	// presence, phonebook and history are served by it, for the user the
	// front authenticated (rest.AsUser).
	API http.Handler
	// State gives the live state (the extensions' conversations and user
	// agents, for the actions the native API has no route for).
	State rest.State
	// Phonebook is the native API's phonebook (rest.Config.Phonebook),
	// for the lists its routes do not serve: all contacts, speed dials;
	// nil: those answer 503.
	Phonebook rest.Phonebook
	// PBX sends the AMI actions of dtmf, mute and unmute; nil: 503.
	PBX rest.PBX
	// Secret signs the JWTs (HS256) and seals the sessions in them; at
	// least 16 bytes, kept across restarts so tokens survive them.
	Secret []byte
	// Store keeps settings and persistent tokens. Default NewMemStore().
	Store Store
	// EndpointTypes gives an extension's NethCTI type (physical, webrtc,
	// nethlink, mobile); nil or "": physical.
	EndpointTypes func(exten string) string
	// Phones are the desk phones' action URLs (answer, hold, mute) by
	// user agent; nil: DefaultPhones. Phone must be set for them to be
	// used.
	Phones []PhoneRule
	// Phone sends the phones' action URLs (NewPhoneClient); nil: answer,
	// toggle_hold and toggle_mute answer 501.
	Phone PhoneDoer
	// OnDefaultDevice is told a user's new default device (POST
	// /user/default_device), for the socket's updateDefaultDevice; nil:
	// no one.
	OnDefaultDevice func(username, exten string)
	// FeatureCodes are the PBX's feature codes by name, as GET
	// /astproxy/feature_codes answers them (the clients read
	// audio_test); nil: DefaultFeatureCodes.
	FeatureCodes map[string]string
	// ActionTimeout bounds an AMI action or a phone's answer. Default
	// rest.DefaultActionTimeout.
	ActionTimeout time.Duration
	// Log receives token issues and failures. Default: discard.
	Log *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Front is the NethCTI front: an http.Handler for /api/... and
// /webrest/..., and the credential checks a socket front shares. Safe for
// concurrent use.
type Front struct {
	cfg    Config
	auth   *auth.Service
	api    http.Handler
	keys   *keys
	store  Store
	creds  *creds
	log    *slog.Logger
	mux    *http.ServeMux
	routes []string // "METHOD /pattern" without the prefix, for tests
	names  atomic.Pointer[userNames]
	reads  readCache
	phones []compiledPhone
}

// New returns the front.
func New(cfg Config) (*Front, error) {
	if cfg.Auth == nil || cfg.API == nil || cfg.State == nil {
		return nil, errors.New("nethcti: Config.Auth, API and State are required")
	}
	k, err := newKeys(cfg.Secret)
	if err != nil {
		return nil, err
	}
	if cfg.Store == nil {
		cfg.Store = NewMemStore()
	}
	if cfg.ActionTimeout <= 0 {
		cfg.ActionTimeout = rest.DefaultActionTimeout
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Phones == nil {
		cfg.Phones = DefaultPhones()
	}
	phones, err := compilePhones(cfg.Phones)
	if err != nil {
		return nil, err
	}
	f := &Front{cfg: cfg, auth: cfg.Auth, api: cfg.API, keys: k, store: cfg.Store, creds: newCreds(),
		log: cfg.Log.With("component", "nethcti"), mux: http.NewServeMux(), phones: phones}
	f.register()
	return f, nil
}

// Run reads the stored persistent tokens back, retrying every few
// seconds until it works (the database may not be ready yet), then
// returns nil; or ctx.Err() if ctx ends first.
func (f *Front) Run(ctx context.Context) error {
	for {
		err := f.loadTokens(ctx)
		if err == nil {
			return nil
		}
		f.log.Warn("persistent tokens not read yet", "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(3 * time.Second):
		}
	}
}

func (f *Front) now() time.Time { return f.cfg.Now() }

// ServeHTTP serves /api/... and /webrest/....
func (f *Front) ServeHTTP(w http.ResponseWriter, r *http.Request) { f.mux.ServeHTTP(w, r) }

// Prefixes are the paths the front serves under: NethCTI's middleware
// (JWT Bearer) and its legacy server (Authorization: user:token).
const (
	PrefixAPI     = "/api"
	PrefixWebrest = "/webrest"
)

// handler serves one route for an identified user (the zero Identity on
// public routes); legacy says which prefix it came through.
type handler func(w http.ResponseWriter, r *http.Request, id Identity, legacy bool) int

// Where a route is served.
const (
	onAPI     = 1
	onWebrest = 2
	onBoth    = onAPI | onWebrest
)

// handle registers pattern ("METHOD /path") under the prefixes of where.
func (f *Front) handle(where int, pattern string, public bool, h handler) {
	method, path, _ := strings.Cut(pattern, " ")
	f.routes = append(f.routes, pattern)
	for _, p := range []struct {
		bit    int
		prefix string
	}{{onAPI, PrefixAPI}, {onWebrest, PrefixWebrest}} {
		if where&p.bit == 0 {
			continue
		}
		legacy := p.bit == onWebrest
		f.mux.HandleFunc(method+" "+p.prefix+path, func(w http.ResponseWriter, r *http.Request) {
			var id Identity
			if !public {
				var err error
				if id, err = f.authenticateHeader(r.Header.Get("Authorization"), legacy); err != nil {
					writeErr(w, r, err)
					return
				}
			}
			h(w, r, id, legacy)
		})
	}
}

// native serves r through the native API for id's user, at path with
// method and body (nil: r's own body and method).
func (f *Front) native(w http.ResponseWriter, r *http.Request, id Identity, method, path string, body []byte) int {
	r2 := rest.AsUser(r, id.User)
	u := *r.URL
	u.Path, u.RawPath = path, ""
	r2.URL = &u
	r2.RequestURI = u.RequestURI()
	if method != "" {
		r2.Method = method
	}
	if body != nil {
		r2.Body = io.NopCloser(bytes.NewReader(body))
		r2.ContentLength = int64(len(body))
	}
	sw := statusWriter{ResponseWriter: w}
	f.api.ServeHTTP(&sw, r2)
	return sw.status
}

// nativeJSON is native with v as the body.
func (f *Front) nativeJSON(w http.ResponseWriter, r *http.Request, id Identity, path string, v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		return writeErr(w, r, err)
	}
	return f.native(w, r, id, http.MethodPost, path, b)
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the server's writer.
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// apiError is an error answered with the native API's error JSON.
func apiError(status int, code, msg string) error {
	return &rest.Error{Status: status, Code: code, Message: msg}
}

func badRequest(msg string) error { return apiError(http.StatusBadRequest, "bad_request", msg) }

// writeErr answers err as the native API would (its error JSON).
func writeErr(w http.ResponseWriter, r *http.Request, err error) int {
	switch {
	case errors.Is(err, ErrBadToken):
		err = apiError(http.StatusUnauthorized, "bad_token", "unknown, revoked or expired token")
	case errors.Is(err, errNotLoaded):
		err = &rest.Error{Status: http.StatusServiceUnavailable, Code: "sessions_loading", Message: "persistent tokens are being read: try again", RetryAfter: 1}
	}
	return rest.WriteError(w, r, err)
}

func writeJSON(w http.ResponseWriter, status int, v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		return rest.WriteError(w, nil, err)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
	return status
}

// decodeLenient reads a NethCTI body into v: unknown fields are ignored
// (the clients send more than a route reads), at most rest.MaxBody bytes.
// An empty body is an empty object.
func decodeLenient(w http.ResponseWriter, r *http.Request, v any) error {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, rest.MaxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return apiError(http.StatusRequestEntityTooLarge, "too_large", "request body too large")
		}
		return badRequest("reading the body: " + err.Error())
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	if err := json.Unmarshal(b, v); err != nil {
		return badRequest("bad JSON body: " + err.Error())
	}
	return nil
}
