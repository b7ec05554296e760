package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/history"
	"github.com/ctibridge/ctibridge/httpserve"
	"github.com/ctibridge/ctibridge/rest"
	"github.com/ctibridge/ctibridge/sdnotify"
	"github.com/ctibridge/ctibridge/ws"
)

// serveConfig is everything `ctibridge serve` reads from flags, env and file.
type serveConfig struct {
	ami, amiUser, amiSecret string
	pbx                     string              // --pbx: the named PBXs, NAME=host:port,...
	pbxCreds                map[string]pbxCreds // the config file's pbxs section
	amiTLS, amiMD5          bool
	amiPing                 time.Duration
	admin                   string
	http                    string
	users                   string
	tlsCert, tlsKey         string
	tokenTTL                time.Duration
	dialPattern             string
	context                 string
	chanTech                string
	queueIface              string
	voicemailExten          string
	popupLink               string
	autoAnswer              string
	autoAnswerOff           string
	actionTimeout           time.Duration
	accessLogEvery          int64
	dataDir                 string
	recordAMI               string
	recordMax               int64
	trunks                  string
	queueNumbers            string
	reconcile               time.Duration
	logFormat, logLevel     string
	db                      string
	phoneCountry            string
	phoneTrunk, phoneIntl   string
	recordCDR               bool
	phonebookURL            string
	historyURL              string
	customerCardURL         string
	upstreamToken           string
	upstreamOAuthURL        string
	upstreamOAuthID         string
	upstreamOAuthSecret     string
	upstreamOAuthScopes     string
	wsReplay                int64
	wsReplayAge             time.Duration
	wsSlowTimeout           time.Duration
	wsAuthTimeout           time.Duration
	trustedProxies          []netip.Prefix
	webhooks                string
	cdrTaken                func([]history.CDR) // not a setting: the webhooks' hook in the recorder
	wsOrigins               string
	dir                     dirConfig
	bus                     busConfig
	nethcti                 nethctiConfig
}

func serveSettings(c *serveConfig) *settings {
	s := &settings{}
	s.Str(&c.ami, "ami", "127.0.0.1:5038", "Asterisk manager address host:port")
	s.Str(&c.amiUser, "ami-user", "", "manager user name (required)")
	s.Str(&c.amiSecret, "ami-secret", "", "manager secret (required; prefer the env var or the file to a flag)")
	s.Bool(&c.amiTLS, "ami-tls", false, "connect to the manager over TLS (Asterisk tlsenable)")
	s.Bool(&c.amiMD5, "ami-md5", false, "log in with the MD5 challenge instead of sending the secret")
	pbxSettings(s, c)
	s.Dur(&c.amiPing, "ami-ping", ami.DefaultPingInterval, "AMI keep-alive period: the state is marked stale when a Ping is 750ms late, the link dropped when one is 3s unanswered (0 disables)")
	s.Str(&c.http, "http", httpserve.DefaultAddr, "REST and WebSocket listener")
	s.Str(&c.admin, "admin", "127.0.0.1:9090", "listener for /healthz, /readyz, /metrics, /debug/pprof")
	s.Str(&c.users, "users", "", "users file (YAML; see docs/rest.md); without it nobody can log in")
	s.Str(&c.tlsCert, "tls-cert", "", "PEM certificate: serve HTTPS (and HTTP/2) on --http")
	s.Str(&c.tlsKey, "tls-key", "", "PEM private key of --tls-cert")
	prefixes(s, &c.trustedProxies, "trusted-proxies", "", "reverse proxies whose X-Forwarded-For is believed (comma-separated addresses or CIDRs), for the login rate limit")
	s.Dur(&c.tokenTTL, "token-ttl", auth.DefaultTokenTTL, "lifetime of a login token")
	s.Str(&c.dialPattern, "dial-pattern", rest.DefaultDialPattern, "regular expression every dialled number must match")
	s.Str(&c.context, "context", rest.DefaultContext, "dialplan context of originated calls, transfers and pickups")
	s.Str(&c.chanTech, "chan-tech", rest.DefaultChanTech, "channel technology of the phones (PJSIP, SIP, IAX2)")
	s.Str(&c.queueIface, "queue-interface", rest.DefaultQueueIface, "queue member interface for queuemember_* ({tech}, {exten} replaced)")
	s.Str(&c.voicemailExten, "voicemail-exten", rest.DefaultVoicemailExten, "extension in --context that drops a call into a mailbox ({exten} replaced; FreePBX: vmu{exten}, or *{exten}), for the panel's transfer to voicemail")
	s.Str(&c.popupLink, "popup-link", "", "customer card the panel's incoming call pop-up links to: an http(s) URL template with {number} and {name}, like https://crm.example.com/card?phone={number}")
	s.Str(&c.autoAnswer, "auto-answer", "default", "phones told to answer at once the first leg of a call made for their user (click-to-call, pickup, spy): <user agent prefix>:call-info or :alert-info, comma-separated, by the phone's SIP user agent, default (Yealink, Snom, Fanvil, Grandstream, Cisco, Gigaset: call-info; Polycom: alert-info) or off")
	s.Str(&c.autoAnswerOff, "auto-answer-off", "", "users whose phones ring for the calls made for them (comma-separated usernames)")
	s.Int(&c.wsReplay, "ws-replay", ws.DefaultReplayMax, "WebSocket resume buffer: changes kept for clients that reconnect")
	s.Dur(&c.wsReplayAge, "ws-replay-age", ws.DefaultReplayMaxAge, "WebSocket resume buffer: the oldest change kept")
	s.Dur(&c.wsSlowTimeout, "ws-slow-timeout", ws.DefaultSlowTimeout, "a WebSocket client that cannot keep up for that long is resent a snapshot or closed")
	s.Dur(&c.wsAuthTimeout, "ws-auth-timeout", ws.DefaultAuthTimeout, "time a WebSocket client has to authenticate")
	s.Str(&c.wsOrigins, "ws-origins", "", "other web origins whose pages may open the WebSocket (comma-separated, https://host[:port], or *); same origin and clients without Origin are always allowed")
	s.Dur(&c.actionTimeout, "action-timeout", rest.DefaultActionTimeout, "how long a call action waits for Asterisk's answer")
	s.Int(&c.accessLogEvery, "access-log-every", 100, "log one request in N (errors always); negative turns it off")
	s.Str(&c.dataDir, "data-dir", "./ctibridge-data", "spool, recordings and embedded database directory")
	s.Str(&c.db, "db", "", "phonebook and history database: postgres://... or sqlite:PATH (default sqlite:<data-dir>/ctibridge.db)")
	s.Str(&c.phoneCountry, "phone-country", "", "home country calling code for number matching, digits only (39 for Italy, as the demo uses; unset, 0721405516 and +39 0721 405516 do not match)")
	s.Str(&c.phoneTrunk, "phone-trunk-prefix", "0", "national trunk prefix for number matching")
	s.Str(&c.phoneIntl, "phone-intl-prefix", "00", "international call prefix for number matching")
	s.Str(&c.phonebookURL, "phonebook-url", "", "use a remote NethCTI-compatible phonebook service instead of --db (comma-separated URLs, balanced)")
	s.Str(&c.historyURL, "history-url", "", "use a remote NethCTI-compatible call history service instead of --db (comma-separated URLs, balanced)")
	s.Str(&c.customerCardURL, "customer-card-url", "", "remote customer-card service for GET /customercard/{number} (comma-separated URLs, balanced)")
	s.Str(&c.upstreamToken, "upstream-token", "", "bearer token sent to the remote phonebook and history services")
	s.Str(&c.upstreamOAuthURL, "upstream-oauth-token-url", "", "OAuth2 client-credentials token URL for the remote services (instead of --upstream-token)")
	s.Str(&c.upstreamOAuthID, "upstream-oauth-client-id", "", "OAuth2 client id for the remote services")
	s.Str(&c.upstreamOAuthSecret, "upstream-oauth-client-secret", "", "OAuth2 client secret for the remote services")
	s.Str(&c.upstreamOAuthScopes, "upstream-oauth-scopes", "", "OAuth2 scopes for the remote services (comma-separated)")
	s.Bool(&c.recordCDR, "record-cdr", true, "write call history from the AMI Cdr events (cdr_manager) to the database")
	s.Str(&c.recordAMI, "record-ami", "", "directory to write the raw AMI stream to (secrets scrubbed), for replay")
	s.Int(&c.recordMax, "record-max-bytes", 100<<20, "size at which an AMI recording file is rotated")
	s.Str(&c.trunks, "trunks", "", "comma-separated endpoint names that are trunks (default: any non-numeric endpoint)")
	s.Str(&c.queueNumbers, "queue-numbers", "", "the numbers callers dial to reach queues whose app_queue name differs, as name=number,... (support=600); not needed on FreePBX")
	s.Dur(&c.reconcile, "reconcile-every", time.Minute, "period of the drift check against CoreShowChannels (0 disables)")
	s.Str(&c.webhooks, "webhooks", "", "webhooks file (YAML; see docs/webhooks.md): signed call events POSTed to CRMs and scripts")
	directorySettings(s, &c.dir)
	busSettings(s, &c.bus)
	nethctiSettings(s, &c.nethcti)
	s.Str(&c.logFormat, "log-format", "text", "log format: text or json")
	s.Str(&c.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	return s
}

// newLogger builds a logger writing format ("text" or "json") at level.
func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	return newLevelLogger(w, format, level, nil)
}

// newLevelLogger is newLogger whose level lives in lv, when not nil, so
// that a reload can change it.
func newLevelLogger(w io.Writer, format, level string, lv *slog.LevelVar) (*slog.Logger, error) {
	if lv == nil {
		lv = new(slog.LevelVar)
	}
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format: want text or json, got %q", format)
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// parseQueueNumbers reads --queue-numbers: name=number,... (support=600).
func parseQueueNumbers(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, f := range splitList(s) {
		name, num, ok := strings.Cut(f, "=")
		name, num = strings.TrimSpace(name), strings.TrimSpace(num)
		if !ok || name == "" || num == "" || strings.Trim(num, "0123456789*#") != "" {
			return nil, configError{fmt.Errorf("queue-numbers: %q is not name=number (support=600)", f)}
		}
		out[name] = num
	}
	return out, nil
}

// errConfig marks a configuration error: main exits with status 78
// (EX_CONFIG), which the unit's RestartPreventExitStatus does not restart.
type configError struct{ error }

func (e configError) Unwrap() error { return e.error }

// serve runs the bridge until ctx is done, then shuts down in order.
func serve(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	// Caught first: SIGHUP's default action would kill the process.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	var c serveConfig
	st := serveSettings(&c)
	if err := st.Parse("serve", args, getenv, stderr); err != nil {
		return configError{err}
	}
	users, probs := checkServe(&c, st)
	if err := firstError(probs); err != nil {
		return configError{err}
	}
	level := new(slog.LevelVar)
	log, err := newLevelLogger(stderr, c.logFormat, c.logLevel, level)
	if err != nil {
		return configError{err}
	}
	for _, p := range probs {
		log.Warn("configuration", "problem", p.Error())
	}
	notify := sdnotify.New(getenv("NOTIFY_SOCKET"))
	defer notify.Close()
	hooks := &bridgeHooks{
		ready:  func() { notify.Ready("PBX state resynchronised: serving") },
		hup:    hup,
		notify: notify,
		// A reload takes what check-config takes: the same flags, env and
		// file; only the users, the log level and the certificate change.
		reload: func() (*auth.Users, string, error) {
			var n serveConfig
			nst := serveSettings(&n)
			if err := nst.Parse("serve", args, getenv, io.Discard); err != nil {
				return nil, "", err
			}
			users, probs := checkServe(&n, nst)
			if err := firstError(probs); err != nil {
				return nil, "", err
			}
			return users, n.logLevel, nil
		},
		level: level,
	}
	notify.Status("connecting to the PBX at " + c.ami)
	return runBridge(ctx, &c, bridgeIn{users: users, log: log, hooks: hooks})
}

// bridgeHooks tie serve to systemd and SIGHUP; demo and tests pass nil.
type bridgeHooks struct {
	ready  func()             // once, when the PBX state is first resynchronised
	hup    <-chan os.Signal   // reload requests
	notify *sdnotify.Notifier // RELOADING/READY around a reload, STOPPING
	// reload rereads the configuration: the users and the log level.
	reload func() (*auth.Users, string, error)
	level  *slog.LevelVar
}

// bridgeAddrs tells a caller (demo, tests) where a running bridge listens.
type bridgeAddrs struct {
	HTTP, Admin string
}

// runBridge builds the bridge (newBridge, bridge.go: AMI client, engine,
// link, REST, WebSocket, admin, phonebook and history stores) from c and
// in and runs it (bridge.Run). On ctx done it shuts down in order: REST
// listener, WebSocket clients (going away), admin listener, link (engine),
// AMI client (which logs off), history recorder (flushes), database.
func runBridge(ctx context.Context, c *serveConfig, in bridgeIn) error {
	b, err := newBridge(ctx, c, in)
	if err != nil {
		return err
	}
	defer b.close()
	a := b.addrs()
	in.log.Info("ctibridge serving", "version", version, "ami", c.ami, "http", a.HTTP, "admin", a.Admin)
	if in.started != nil {
		in.started(a)
	}
	return b.Run(ctx)
}

// endpointNames merges the extension names given with those of the users
// owning one endpoint each: until the PBX shows a caller ID name for an
// extension, the grid still says who sits there.
func endpointNames(users *auth.Users, names map[string]string) map[string]string {
	out := make(map[string]string, len(names))
	for _, u := range users.All() {
		if len(u.Endpoints) == 1 && u.Name != "" {
			out[u.Endpoints[0]] = u.Name
		}
	}
	for k, v := range names {
		out[k] = v
	}
	return out
}

// mainCellphones maps each user's main extension (its first endpoint) to
// its cellphone: a forward there shows as presence "cellphone".
func mainCellphones(users *auth.Users) map[string]string {
	out := map[string]string{}
	for _, u := range users.All() {
		if len(u.Endpoints) > 0 && u.Cellphone != "" {
			out[u.Endpoints[0]] = u.Cellphone
		}
	}
	return out
}

// reconcileSetting maps the user's "0 disables" onto link.Config's
// "negative disables".
func reconcileSetting(d time.Duration) time.Duration {
	if d <= 0 {
		return -1
	}
	return d
}

// run sends READY=1 when the link is first ready and serves reloads until
// ctx is done. A failed reload changes nothing and is logged; the service
// goes on with what it had.
func (h *bridgeHooks) run(ctx context.Context, isReady func() bool, setUsers func(*auth.Users) int, apiSrv *httpserve.Server, log *slog.Logger) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	ready := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if !ready && isReady() {
				ready = true
				h.ready()
				tick.Stop()
			}
		case <-h.hup:
			h.notify.Reloading("reloading users, log level, certificate")
			users, level, err := h.reload()
			if err == nil {
				err = apiSrv.ReloadTLS()
			}
			if err != nil {
				log.Error("reload failed: keeping the running configuration", "err", err)
			} else {
				h.level.UnmarshalText([]byte(level))
				revoked := setUsers(users)
				log.Info("reloaded", "users", users.Len(), "revoked_tokens", revoked, "log_level", h.level.Level().String())
			}
			status := "serving"
			if !ready {
				status = "waiting for the PBX"
			}
			h.notify.Ready(status)
		}
	}
}
