package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/ctibridge/ctibridge/admin"
	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
	"github.com/ctibridge/ctibridge/history"
	"github.com/ctibridge/ctibridge/link"
	"github.com/ctibridge/ctibridge/panel"
	"github.com/ctibridge/ctibridge/rest"
	"github.com/ctibridge/ctibridge/sdnotify"
	"github.com/ctibridge/ctibridge/ws"
)

// serveConfig is everything `ctibridge serve` reads from flags, env and file.
type serveConfig struct {
	ami, amiUser, amiSecret string
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
	actionTimeout           time.Duration
	accessLogEvery          int64
	dataDir                 string
	recordAMI               string
	recordMax               int64
	trunks                  string
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
}

func serveSettings(c *serveConfig) *settings {
	s := &settings{}
	s.str(&c.ami, "ami", "127.0.0.1:5038", "Asterisk manager address host:port")
	s.str(&c.amiUser, "ami-user", "", "manager user name (required)")
	s.str(&c.amiSecret, "ami-secret", "", "manager secret (required; prefer the env var or the file to a flag)")
	s.boolean(&c.amiTLS, "ami-tls", false, "connect to the manager over TLS (Asterisk tlsenable)")
	s.boolean(&c.amiMD5, "ami-md5", false, "log in with the MD5 challenge instead of sending the secret")
	s.dur(&c.amiPing, "ami-ping", ami.DefaultPingInterval, "AMI keep-alive period: the state is marked stale when a Ping is 750ms late, the link dropped when one is 3s unanswered (0 disables)")
	s.str(&c.http, "http", "127.0.0.1:8080", "REST and WebSocket listener")
	s.str(&c.admin, "admin", "127.0.0.1:9090", "listener for /healthz, /readyz, /metrics, /debug/pprof")
	s.str(&c.users, "users", "", "users file (YAML; see docs/rest.md); without it nobody can log in")
	s.str(&c.tlsCert, "tls-cert", "", "PEM certificate: serve HTTPS (and HTTP/2) on --http")
	s.str(&c.tlsKey, "tls-key", "", "PEM private key of --tls-cert")
	s.prefixes(&c.trustedProxies, "trusted-proxies", "", "reverse proxies whose X-Forwarded-For is believed (comma-separated addresses or CIDRs), for the login rate limit")
	s.dur(&c.tokenTTL, "token-ttl", 12*time.Hour, "lifetime of a login token")
	s.str(&c.dialPattern, "dial-pattern", rest.DefaultDialPattern, "regular expression every dialled number must match")
	s.str(&c.context, "context", "from-internal", "dialplan context of originated calls, transfers and pickups")
	s.str(&c.chanTech, "chan-tech", "PJSIP", "channel technology of the phones (PJSIP, SIP, IAX2)")
	s.str(&c.queueIface, "queue-interface", "{tech}/{exten}", "queue member interface for queuemember_* ({tech}, {exten} replaced)")
	s.integer(&c.wsReplay, "ws-replay", 10000, "WebSocket resume buffer: changes kept for clients that reconnect")
	s.dur(&c.wsReplayAge, "ws-replay-age", time.Minute, "WebSocket resume buffer: the oldest change kept")
	s.dur(&c.wsSlowTimeout, "ws-slow-timeout", 10*time.Second, "a WebSocket client that cannot keep up for that long is resent a snapshot or closed")
	s.dur(&c.wsAuthTimeout, "ws-auth-timeout", 5*time.Second, "time a WebSocket client has to authenticate")
	s.dur(&c.actionTimeout, "action-timeout", 5*time.Second, "how long a call action waits for Asterisk's answer")
	s.integer(&c.accessLogEvery, "access-log-every", 100, "log one request in N (errors always); negative turns it off")
	s.str(&c.dataDir, "data-dir", "./ctibridge-data", "spool, recordings and embedded database directory")
	s.str(&c.db, "db", "", "phonebook and history database: postgres://... or sqlite:PATH (default sqlite:<data-dir>/ctibridge.db)")
	s.str(&c.phoneCountry, "phone-country", "", "home country calling code for number matching, digits only (39 for Italy)")
	s.str(&c.phoneTrunk, "phone-trunk-prefix", "0", "national trunk prefix for number matching")
	s.str(&c.phoneIntl, "phone-intl-prefix", "00", "international call prefix for number matching")
	s.str(&c.phonebookURL, "phonebook-url", "", "use a remote NethCTI-compatible phonebook service instead of --db (comma-separated URLs, balanced)")
	s.str(&c.historyURL, "history-url", "", "use a remote NethCTI-compatible call history service instead of --db (comma-separated URLs, balanced)")
	s.str(&c.customerCardURL, "customer-card-url", "", "remote customer-card service for GET /customercard/{number} (comma-separated URLs, balanced)")
	s.str(&c.upstreamToken, "upstream-token", "", "bearer token sent to the remote phonebook and history services")
	s.str(&c.upstreamOAuthURL, "upstream-oauth-token-url", "", "OAuth2 client-credentials token URL for the remote services (instead of --upstream-token)")
	s.str(&c.upstreamOAuthID, "upstream-oauth-client-id", "", "OAuth2 client id for the remote services")
	s.str(&c.upstreamOAuthSecret, "upstream-oauth-client-secret", "", "OAuth2 client secret for the remote services")
	s.str(&c.upstreamOAuthScopes, "upstream-oauth-scopes", "", "OAuth2 scopes for the remote services (comma-separated)")
	s.boolean(&c.recordCDR, "record-cdr", true, "write call history from the AMI Cdr events (cdr_manager) to the database")
	s.str(&c.recordAMI, "record-ami", "", "directory to write the raw AMI stream to (secrets scrubbed), for replay")
	s.integer(&c.recordMax, "record-max-bytes", 100<<20, "size at which an AMI recording file is rotated")
	s.str(&c.trunks, "trunks", "", "comma-separated endpoint names that are trunks (default: any non-numeric endpoint)")
	s.dur(&c.reconcile, "reconcile-every", time.Minute, "period of the drift check against CoreShowChannels (0 disables)")
	s.str(&c.webhooks, "webhooks", "", "webhooks file (YAML; see docs/webhooks.md): signed call events POSTed to CRMs and scripts")
	s.str(&c.logFormat, "log-format", "text", "log format: text or json")
	s.str(&c.logLevel, "log-level", "info", "log level: debug, info, warn or error")
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
	if err := st.parse("serve", args, getenv, stderr); err != nil {
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
			if err := nst.parse("serve", args, getenv, io.Discard); err != nil {
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
	return runBridgeHooks(ctx, c, users, nil, log, nil, hooks)
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

// runBridge wires and runs the bridge: AMI client, engine, link, REST,
// admin, phonebook and history stores. started, when not nil, receives the
// listen addresses once every listener is open. On ctx done it shuts down
// in order: REST listener, WebSocket clients (going away), admin listener,
// link (engine), AMI client (which logs off), history recorder (flushes),
// database.
//
// names gives extensions' display names by number (the PBX does not list
// them); users' display names fill in for the endpoints they own.
func runBridge(ctx context.Context, c serveConfig, users *auth.Users, names map[string]string, log *slog.Logger, started func(bridgeAddrs)) error {
	return runBridgeHooks(ctx, c, users, names, log, started, nil)
}

// runBridgeHooks is runBridge tied to systemd and SIGHUP through hooks.
func runBridgeHooks(ctx context.Context, c serveConfig, users *auth.Users, names map[string]string, log *slog.Logger, started func(bridgeAddrs), hooks *bridgeHooks) error {
	acfg := ami.Config{
		Addr:     c.ami,
		Username: c.amiUser,
		Secret:   c.amiSecret,
		MD5:      c.amiMD5,
		Log:      log.With("component", "ami"),
		// Same mapping: the user's 0 disables, the client's negative does.
		PingInterval: reconcileSetting(c.amiPing),
	}
	if c.amiTLS {
		host, _, _ := net.SplitHostPort(c.ami)
		acfg.TLS = &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
	}
	if c.recordAMI != "" {
		rec, err := ami.NewRotatingRecorder(c.recordAMI, c.recordMax, log.With("component", "recorder"))
		if err != nil {
			return fmt.Errorf("--record-ami: %w", err)
		}
		defer rec.Close()
		acfg.Record = rec
	}
	wh, err := loadWebhooks(&c)
	if err != nil {
		return err
	}
	// The stores: phonebook (caller names, contacts) and call history.
	// Closed last of all.
	st, err := openStores(ctx, c, log)
	if err != nil {
		return err
	}
	defer st.Close()
	rec := st.recorder

	client := ami.NewClient(acfg)
	eng := calls.New(calls.Config{Trunks: splitList(c.trunks), Names: endpointNames(users, names), NameLookup: st.Lookup,
		Cellphones: mainCellphones(users), FeedSize: int(c.wsReplay), Log: log.With("component", "calls")})
	lcfg := link.Config{ReconcileEvery: reconcileSetting(c.reconcile), Log: log.With("component", "link")}
	if rec != nil {
		lcfg.OnMessage = rec.Observe
	}
	lk := link.New(client, eng, lcfg)
	authSvc := auth.NewService(users, auth.Config{TokenTTL: c.tokenTTL})

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(link.NewCollector(lk, client), storeCollector{st})
	if err := wh.start(c, eng, st.Lookup, reg, log); err != nil {
		return err
	}
	defer wh.shutdown()
	restMetrics := rest.NewMetrics()
	if err := restMetrics.Register(reg); err != nil {
		return err
	}
	rcfg := rest.Config{
		Auth: authSvc, State: eng, PBX: client, Refresh: lk, Metrics: restMetrics,
		DialPattern: c.dialPattern, Context: c.context, ChanTech: c.chanTech,
		QueueInterface: c.queueIface, ActionTimeout: c.actionTimeout,
		Phonebook: st.phonebook, History: st.history, CustomerCard: st.card, TrustedProxies: c.trustedProxies,
		AccessLogEvery: int(c.accessLogEvery), Log: log.With("component", "rest"),
	}
	if rec != nil {
		rcfg.Recordings = rec // never a nil pointer in the interface
	}
	api, err := rest.NewHandler(rcfg)
	if err != nil {
		return err
	}
	hub, err := ws.NewHub(eng, authSvc, ws.Config{
		ReplayMax: int(c.wsReplay), ReplayMaxAge: c.wsReplayAge, SlowTimeout: c.wsSlowTimeout,
		AuthTimeout: c.wsAuthTimeout, Registerer: reg, Log: log.With("component", "ws"),
	})
	if err != nil {
		return err
	}
	// One listener: the web panel at / and /panel/, the WebSocket stream at
	// /ws, the REST API for the rest.
	ui := panel.Handler()
	mux := http.NewServeMux()
	mux.Handle("GET /{$}", ui)
	mux.Handle("GET /index.html", ui)
	mux.Handle("/panel/", ui)
	mux.Handle("GET /ws", hub)
	mux.Handle("/", api)
	apiSrv, err := rest.NewServer(rest.ServerConfig{Addr: c.http, TLSCert: c.tlsCert, TLSKey: c.tlsKey, Log: log}, mux)
	if err != nil {
		return err
	}
	apiLn, err := apiSrv.Listen()
	if err != nil {
		return err
	}
	adminLn, err := net.Listen("tcp", c.admin)
	if err != nil {
		apiLn.Close()
		return fmt.Errorf("admin listener: %w", err)
	}
	adminSrv := &http.Server{Handler: admin.NewHandler(reg, lk.Ready, st.status), ReadHeaderTimeout: 5 * time.Second}
	log.Info("ctibridge serving", "version", version, "ami", c.ami, "http", apiLn.Addr().String(), "admin", adminLn.Addr().String())
	if started != nil {
		started(bridgeAddrs{HTTP: apiLn.Addr().String(), Admin: adminLn.Addr().String()})
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errc := make(chan error, 4)
	// The client has its own lifetime: it must outlive the link so that it
	// can log off after everything else has stopped.
	clientCtx, stopClient := context.WithCancel(context.Background())
	defer stopClient()
	clientDone := make(chan struct{})
	go func() {
		defer close(clientDone)
		client.Run(clientCtx)
	}()
	wg.Go(func() {
		if err := lk.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			errc <- fmt.Errorf("link: %w", err)
		}
	})
	wg.Go(func() { authSvc.Run(ctx) })
	// The hub has its own lifetime: it must be running before the first
	// upgrade and stop only after it has said going-away to its clients.
	hubCtx, stopHub := context.WithCancel(context.Background())
	defer stopHub()
	hubDone := make(chan struct{})
	go func() {
		defer close(hubDone)
		hub.Run(hubCtx)
	}()
	wg.Go(func() { st.run(ctx) })
	// The recorder outlives the link so that the last CDRs it saw are
	// written (or spooled) before the database closes.
	recCtx, stopRec := context.WithCancel(context.Background())
	defer stopRec()
	recDone := make(chan struct{})
	go func() {
		defer close(recDone)
		if rec != nil {
			rec.Run(recCtx)
		}
	}()
	wg.Go(func() {
		if err := apiSrv.Serve(apiLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("http: %w", err)
		}
	})
	wg.Go(func() {
		if err := adminSrv.Serve(adminLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("admin: %w", err)
		}
	})

	if hooks != nil {
		wg.Go(func() { hooks.run(ctx, lk, authSvc, apiSrv, log) })
	}

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errc:
		log.Error("stopping", "err", runErr)
	}
	log.Info("shutting down")
	if hooks != nil {
		hooks.notify.Stopping("shutting down")
	}
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	apiSrv.Shutdown(sctx)
	// Shutdown does not touch hijacked connections: the hub tells its
	// WebSocket clients itself that the server is going away.
	hub.Close()
	stopHub()
	<-hubDone
	adminSrv.Shutdown(sctx)
	cancel()
	wg.Wait()
	stopClient()
	<-clientDone
	stopRec()
	<-recDone
	wh.shutdown()
	return runErr
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
func (h *bridgeHooks) run(ctx context.Context, lk *link.Link, authSvc *auth.Service, apiSrv *rest.Server, log *slog.Logger) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	ready := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if !ready && lk.Ready() {
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
				revoked := authSvc.SetUsers(users)
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
