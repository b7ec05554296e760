package rest

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
	"github.com/ctibridge/ctibridge/history"
)

// State gives the latest published snapshot; *calls.Engine satisfies it.
// Snapshot must be safe to call from any goroutine and never return nil.
type State interface {
	Snapshot() *calls.Snapshot
}

// PBX sends one AMI action and waits for Asterisk's answer; *ami.Client
// satisfies it. Do returns *ami.ActionError when Asterisk answered
// "Response: Error", ami.ErrNotConnected when the link is down, and a
// timeout error (ami.IsTimeout) when ctx expired first.
type PBX interface {
	Do(ctx context.Context, a ami.Message) (ami.Response, error)
}

// Defaults of Config.
const (
	DefaultDialPattern   = `^[0-9*#+]{1,32}$`
	DefaultContext       = "from-internal"
	DefaultChanTech      = "PJSIP"
	DefaultActionTimeout = 5 * time.Second
	DefaultQueueIface    = "{tech}/{exten}"
	// MaxBody is the largest request body accepted (413 beyond).
	MaxBody = 64 << 10
)

// Config configures NewHandler. Auth and State are required; PBX is
// required for the action routes (without it they answer 503).
type Config struct {
	Auth  *auth.Service
	State State
	PBX   PBX
	// Sites are the named PBXs when several are followed in one process;
	// State is then the combined state (calls.Multi) and PBX the default
	// PBX's client (sites.go).
	Sites []Site

	// DialPattern is the regular expression every number or extension
	// given to an action must match (it becomes an AMI header). Default
	// DefaultDialPattern: digits, *, # and +, at most 32.
	DialPattern string
	// Context is the dialplan context of originated calls, transfers and
	// pickups. Default "from-internal" (FreePBX).
	Context string
	// ChanTech is the channel technology of the phones: "PJSIP" (default)
	// or "SIP", "IAX2".
	ChanTech string
	// QueueInterface is the queue member interface for queuemember_add and
	// friends, with {tech} and {exten} replaced. Default "{tech}/{exten}";
	// FreePBX uses "Local/{exten}@from-queue/n".
	QueueInterface string
	// VoicemailExten is the extension, in Context, that drops a call into
	// a mailbox ({exten} replaced): transfer_voicemail. Default
	// DefaultVoicemailExten (FreePBX); "*{exten}" is FreePBX's direct
	// dial to voicemail.
	VoicemailExten string
	// PopupLink, when set, is the URL template of the customer card the
	// panel's incoming call pop-up links to, {number} and {name} replaced
	// by the caller's, URL-escaped (NethCTI's paramurl); only http and
	// https (CheckPopupLink). GET /user/me hands it to the panel.
	PopupLink string
	// AutoAnswer, when set, has the user's own phone answer the first
	// leg of the calls ctibridge originates for the user at once
	// (autoanswer.go).
	AutoAnswer *AutoAnswer
	// ActionTimeout bounds the wait for Asterisk's answer to an action.
	// Default 5 s.
	ActionTimeout time.Duration

	// Refresh, when set, re-reads what an action changed in AstDB (the
	// forwards and DND after cfcall, dnd and POST user/presence), which
	// raises no AMI event: *link.Link's Refresh.
	Refresh Refresher
	// Recordings, when set, learns the file of each recording start_record
	// starts, for the call's history row (*history.Recorder).
	Recordings RecordingNoter

	// Phonebook serves /phonebook/...; nil: those routes answer 503.
	// *phonebook.Book (a database) or *phonebook.Remote (a remote
	// service); never a nil pointer in a non-nil interface.
	Phonebook Phonebook
	// History serves /historycall/... and /histcallswitch/...; nil: 503.
	History history.Store
	// CustomerCard, when set, serves GET /customercard/{number} by asking
	// this remote service (a CRM's caller page); nil: 503.
	CustomerCard Doer
	// HistoryLocation is the time zone of history dates (YYYYMMDD) and of
	// CSV times. Default time.Local.
	HistoryLocation *time.Location

	// TrustedProxies are the reverse proxies (nginx terminating TLS) whose
	// X-Forwarded-For header is believed: the login rate limit then counts
	// the client's address, not the proxy's. Default none: the peer
	// address is the client. See ParseTrustedProxies.
	TrustedProxies []netip.Prefix

	// Metrics, when set, receives per-route counts and latencies.
	Metrics *Metrics
	// Log receives the access log and errors. Default: discard.
	Log *slog.Logger
	// AccessLogEvery logs one request in that many (at Info); failed
	// requests (status >= 500) are always logged. Default 100; negative
	// turns the sampled log off.
	AccessLogEvery int
	// Now is the clock (recording file names). Default time.Now.
	Now func() time.Time
}

// handler serves the REST API. Everything in it is immutable after
// NewHandler except the read cache and the access-log counter.
type handler struct {
	cfg     Config
	log     *slog.Logger
	auth    *auth.Service
	state   State
	pbx     PBX
	sites   map[string]Site // Config.Sites by name
	byPBXs  pbxCache        // ?pbx= collections of the latest version
	dial    *regexp.Regexp
	metrics *Metrics
	mux     *http.ServeMux
	routes  []string // "METHOD /pattern", for the OpenAPI test

	cache      atomic.Pointer[verCache]
	vmCounters atomic.Pointer[vmCounters] // voicemail/new_counters of the latest snapshot
	logTick    atomic.Uint64

	refusalMu    sync.Mutex // guards refusalAt, refusalQuiet
	refusalAt    time.Time  // last "login refused" log line
	refusalQuiet int        // refusals not logged since
}

// NewHandler returns the REST API handler.
func NewHandler(cfg Config) (http.Handler, error) {
	h, err := newHandler(cfg)
	if err != nil {
		return nil, err
	}
	return h, nil
}

func newHandler(cfg Config) (*handler, error) {
	if cfg.Auth == nil || cfg.State == nil {
		return nil, errors.New("rest: Config.Auth and Config.State are required")
	}
	if cfg.DialPattern == "" {
		cfg.DialPattern = DefaultDialPattern
	}
	dial, err := regexp.Compile(cfg.DialPattern)
	if err != nil {
		return nil, errors.New("rest: dial pattern: " + err.Error())
	}
	if cfg.Context == "" {
		cfg.Context = DefaultContext
	}
	if cfg.ChanTech == "" {
		cfg.ChanTech = DefaultChanTech
	}
	if cfg.QueueInterface == "" {
		cfg.QueueInterface = DefaultQueueIface
	}
	for _, v := range []string{cfg.Context, cfg.ChanTech, cfg.QueueInterface} {
		if strings.ContainsAny(v, "\r\n\x00") {
			return nil, errors.New("rest: CR, LF or NUL in the context, channel technology or queue interface")
		}
	}
	if cfg.VoicemailExten == "" {
		cfg.VoicemailExten = DefaultVoicemailExten
	}
	if err := CheckVoicemailExten(cfg.VoicemailExten); err != nil {
		return nil, errors.New("rest: " + err.Error())
	}
	if cfg.PopupLink != "" {
		if err := CheckPopupLink(cfg.PopupLink); err != nil {
			return nil, errors.New("rest: " + err.Error())
		}
	}
	if cfg.ActionTimeout <= 0 {
		cfg.ActionTimeout = DefaultActionTimeout
	}
	if cfg.AccessLogEvery == 0 {
		cfg.AccessLogEvery = 100
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &handler{
		cfg: cfg, log: log.With("component", "rest"), auth: cfg.Auth, state: cfg.State, pbx: cfg.PBX,
		dial: dial, metrics: cfg.Metrics, mux: http.NewServeMux(),
	}
	for _, s := range cfg.Sites {
		if err := calls.CheckPBXName(s.Name); err != nil {
			return nil, errors.New("rest: site: " + err.Error())
		}
		if _, dup := h.sites[s.Name]; dup || s.State == nil || s.PBX == nil {
			return nil, errors.New("rest: site " + s.Name + " twice, or without State or PBX")
		}
		if h.sites == nil {
			h.sites = map[string]Site{}
		}
		h.sites[s.Name] = s
	}
	h.register()
	h.mux.HandleFunc("/", h.notFound)
	return h, nil
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// endpoint serves one route for an authenticated user (nil for public
// routes) and returns the status it wrote.
type endpoint func(w http.ResponseWriter, r *http.Request, u *auth.User) int

// handle registers a route; public routes need no token.
func (h *handler) handle(pattern string, public bool, f endpoint) {
	h.routes = append(h.routes, pattern)
	obs := h.metrics.route(pattern)
	h.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		var u *auth.User
		status := 0
		if !public {
			var err error
			if u, err = h.authenticate(r); err != nil {
				status = writeError(w, h.log, r, err)
			}
		}
		if status == 0 {
			status = f(w, r, u)
		}
		d := time.Since(start)
		obs.observe(status, d)
		h.accessLog(r, u, status, d)
	})
}

var errNoToken = &Error{Status: http.StatusUnauthorized, Code: "no_token", Message: "missing bearer token (Authorization: Bearer <token>)"}

// bearer extracts the token of an "Authorization: Bearer" header.
func bearer(r *http.Request) (string, bool) {
	v := r.Header["Authorization"]
	if len(v) != 1 {
		return "", false
	}
	const p = "Bearer "
	if len(v[0]) <= len(p) || !strings.EqualFold(v[0][:len(p)], p) {
		return "", false
	}
	return strings.TrimSpace(v[0][len(p):]), true
}

// authenticate returns the user of the request's token. It does not
// allocate.
func (h *handler) authenticate(r *http.Request) (*auth.User, error) {
	if u := userOf(r); u != nil {
		return u, nil // a front of this process checked its own credentials (AsUser)
	}
	tok, ok := bearer(r)
	if !ok {
		return nil, errNoToken
	}
	u, _, err := h.auth.Authenticate(tok)
	return u, err
}

func (h *handler) accessLog(r *http.Request, u *auth.User, status int, d time.Duration) {
	if status < 500 && (h.cfg.AccessLogEvery < 0 || h.logTick.Add(1)%uint64(h.cfg.AccessLogEvery) != 0) {
		return
	}
	user := ""
	if u != nil {
		user = u.Username
	}
	h.log.Info("http request", "method", r.Method, "path", r.URL.Path, "status", status,
		"duration_ms", float64(d.Microseconds())/1000, "user", user, "remote", r.RemoteAddr,
		"sampled_every", h.cfg.AccessLogEvery)
}

// notFound answers unrouted paths with the error JSON: 405 when the path
// exists with another method, 404 otherwise.
func (h *handler) notFound(w http.ResponseWriter, r *http.Request) {
	for _, m := range []string{http.MethodGet, http.MethodPost} {
		if m == r.Method {
			continue
		}
		r2 := r.Clone(r.Context())
		r2.Method = m
		if _, p := h.mux.Handler(r2); p != "/" && p != "" {
			w.Header().Set("Allow", m)
			writeError(w, h.log, r, errorf(http.StatusMethodNotAllowed, "method_not_allowed", "%s is not allowed here; use %s", r.Method, m))
			return
		}
	}
	writeError(w, h.log, r, notFound("no such route: %s %s", r.Method, r.URL.Path))
}

// register lists every route.
func (h *handler) register() {
	h.handle("POST /auth/login", true, h.login)
	h.handle("POST /auth/logout", false, h.logout)
	h.handle("POST /auth/refresh", true, h.refresh)
	h.handle("GET /auth/sessions", false, h.listSessions)
	h.handle("POST /auth/sessions/revoke", false, h.revokeSessions)
	h.handle("GET /user/me", false, h.me)

	h.handle("GET /astproxy/status", false, h.byPBX(resStatus, h.getStatus))
	h.handle("GET /astproxy/extensions", false, h.byPBX(resExtensions, h.getExtensions))
	h.handle("GET /astproxy/extension/{exten}", false, h.seenID("exten", h.getExtension))
	h.handle("GET /astproxy/conversations", false, h.byPBX(resConversations, h.getConversations))
	h.handle("GET /astproxy/queues", false, h.byPBX(resQueues, h.getQueues))
	h.handle("GET /astproxy/queue/{queue}", false, h.seenID("queue", h.getQueue))
	h.handle("GET /astproxy/parkings", false, h.byPBX(resParkings, h.getParkings))
	h.handle("GET /astproxy/trunks", false, h.byPBX(resTrunks, h.getTrunks))
	h.handle("GET /astproxy/conferences", false, h.byPBX(resConferences, h.getConferences))
	h.handle("GET /astproxy/conference/{endpoint}", false, h.seenID("endpoint", h.getConference))

	for _, a := range slices.Concat(actions, callActions, confActions, transferActions) {
		h.handle("POST /astproxy/"+a.name, false, h.action(a))
	}

	h.registerPresence()
	h.registerPhonebook()
	h.registerHistory()
	h.registerCustomerCard()

	h.handle("GET /openapi.yaml", true, serveOpenAPI)
}
