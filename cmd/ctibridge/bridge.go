package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ctibridge/ctibridge/admin"
	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
	"github.com/ctibridge/ctibridge/directory"
	"github.com/ctibridge/ctibridge/httpserve"
	"github.com/ctibridge/ctibridge/link"
	"github.com/ctibridge/ctibridge/nethcti"
	"github.com/ctibridge/ctibridge/nethcti/sio"
	"github.com/ctibridge/ctibridge/panel"
	"github.com/ctibridge/ctibridge/rest"
	"github.com/ctibridge/ctibridge/site"
	"github.com/ctibridge/ctibridge/ws"
)

// bridge is every component of a running ctibridge. newBridge builds them
// all from the settings and opens the listeners, starting no goroutine;
// Run starts them and, when its context ends, stops them in order; close
// releases what newBridge opened.
type bridge struct {
	// Immutable after newBridge.
	log       *slog.Logger
	hooks     *bridgeHooks  // nil for demo and tests
	amiRec    *ami.Recorder // --record-ami; nil without it
	stores    *stores       // phonebook, history, CDR recorder
	webhooks  *webhooks     // --webhooks; nil without it
	client    *ami.Client   // nil on an edge (--bus-edge)
	eng       *calls.Engine // the default PBX's; on the bus, the served replica's
	link      *link.Link    // nil on an edge
	bus       *site.BusPBX  // --bus: the default PBX's node (bus.go); nil without it
	sites     *site.Set     // --pbx; nil without it
	auth      *auth.Service
	authNow   atomic.Pointer[auth.Service] // auth, for the stores' goroutines once it exists
	dirs      *directory.Set               // --dir-* directories; nil without any
	closeDirs func()                       // closes the directories' connections
	setUsers  func(*auth.Users) int        // a reload's users file, merged with dirs when there are
	hub       *ws.Hub
	nethcti   *nethcti.Front    // --nethcti: NethVoice's clients at /api and /webrest; nil without it
	sio       *sio.Server       // --nethcti: NethCTI's socket.io at /api/ws and /socket.io; nil without it
	api       *httpserve.Server // REST, /ws and the panel on apiLn
	apiLn     net.Listener
	admin     *http.Server // /healthz, /readyz, /metrics, pprof on adminLn
	adminLn   net.Listener
}

// bridgeIn is what a bridge is built from beside its settings.
type bridgeIn struct {
	users *auth.Users // the users file's
	// names gives extensions' display names by number (the PBX does not
	// list them); users' display names fill in for the endpoints they own.
	names map[string]string
	log   *slog.Logger
	// started, when not nil, receives the listen addresses once every
	// listener is open.
	started func(bridgeAddrs)
	hooks   *bridgeHooks // serve's; nil for demo and tests
}

// newBridge builds the bridge c describes from in. On error nothing is
// left open.
func newBridge(ctx context.Context, c *serveConfig, in bridgeIn) (_ *bridge, err error) {
	users, log := in.users, in.log
	b := &bridge{log: log, hooks: in.hooks}
	defer func() {
		if err != nil {
			b.close()
		}
	}()
	acfg := amiConfig(c, log)
	if c.recordAMI != "" {
		b.amiRec, err = ami.NewRotatingRecorder(c.recordAMI, c.recordMax, log.With("component", "recorder"))
		if err != nil {
			return nil, fmt.Errorf("--record-ami: %w", err)
		}
		acfg.Record = b.amiRec
	}
	if b.webhooks, err = loadWebhooks(c); err != nil {
		return nil, err
	}
	if err := b.openStores(ctx, c, users); err != nil {
		return nil, err
	}
	st, rec := b.stores, b.stores.recorder

	if err := b.openEngine(ctx, c, in, acfg); err != nil {
		return nil, err
	}
	var state interface {
		rest.State
		ws.State
	} = b.eng
	if b.bus != nil {
		state = b.bus.Node().State() // stale while the node cannot hear its stream
	}
	if b.sites != nil {
		state = b.sites.Multi()
	}
	if err := b.openAuth(ctx, c, users); err != nil {
		return nil, err
	}

	reg, err := b.registry()
	if err != nil {
		return nil, err
	}
	if err := b.webhooks.open(c, b.webhookPBXs(c), st.Lookup, reg, log); err != nil {
		return nil, err
	}
	restMetrics := rest.NewMetrics()
	if err := restMetrics.Register(reg); err != nil {
		return nil, err
	}
	aa, err := autoAnswer(c)
	if err != nil {
		return nil, err
	}
	rcfg := rest.Config{AutoAnswer: aa,
		Auth: b.auth, State: state, PBX: b.client, Sites: restSites(b.sites), Refresh: b.link, Metrics: restMetrics,
		DialPattern: c.dialPattern, Context: c.context, ChanTech: c.chanTech,
		QueueInterface: c.queueIface, ActionTimeout: c.actionTimeout, VoicemailExten: c.voicemailExten, PopupLink: c.popupLink,
		Phonebook: st.phonebook, History: st.history, CustomerCard: st.card, TrustedProxies: c.trustedProxies,
		AccessLogEvery: int(c.accessLogEvery), Log: log.With("component", "rest"),
	}
	if rec != nil {
		rcfg.Recordings = rec // never a nil pointer in the interface
	}
	if b.bus != nil {
		rcfg.PBX, rcfg.Refresh = b.bus, b.bus // to the leader, wherever it is
	}
	api, err := rest.NewHandler(rcfg)
	if err != nil {
		return nil, err
	}
	checkOrigin, err := rest.CheckOrigin(splitList(c.wsOrigins))
	if err != nil {
		return nil, fmt.Errorf("--ws-origins: %w", err)
	}
	b.hub, err = ws.NewHub(state, b.auth, ws.Config{
		ReplayMax: int(c.wsReplay), ReplayMaxAge: c.wsReplayAge, SlowTimeout: c.wsSlowTimeout,
		AuthTimeout: c.wsAuthTimeout, CheckOrigin: checkOrigin, Registerer: reg, Log: log.With("component", "ws"),
		Epoch: b.busEpoch(),
	})
	if err != nil {
		return nil, err
	}
	// One listener: the web panel at / and /panel/, the WebSocket stream at
	// /ws, the REST API for the rest.
	ui := panel.Handler()
	mux := http.NewServeMux()
	mux.Handle("GET /{$}", ui)
	mux.Handle("GET /index.html", ui)
	mux.Handle("/panel/", ui)
	mux.Handle("GET /ws", b.hub)
	mux.Handle("/", api)
	if err := b.openNethCTI(c, api, state, mux); err != nil {
		return nil, err
	}
	if err := b.listen(c, rest.SecureHeaders(mux), admin.NewHandler(reg, func() bool { return b.ready() && b.sites.Ready() }, st.status)); err != nil {
		return nil, err
	}
	return b, nil
}

// openEngine builds the AMI client (none on an edge), the engine and the
// link, or, on the bus, the node and its replicas (bus.go).
func (b *bridge) openEngine(ctx context.Context, c *serveConfig, in bridgeIn, acfg ami.Config) error {
	st, rec, log := b.stores, b.stores.recorder, b.log
	if !c.bus.edge {
		b.client = ami.NewClient(acfg)
	}
	queueNumbers, err := parseQueueNumbers(c.queueNumbers)
	if err != nil {
		return err
	}
	ecfg := engineConfig(c, in, queueNumbers, st)
	lcfg := link.Config{ReconcileEvery: reconcileSetting(c.reconcile), Log: log.With("component", "link")}
	if rec != nil {
		lcfg.OnMessage = rec.Observe
	}
	specs, err := parsePBXs(c)
	if err != nil {
		return fmt.Errorf("--pbx: %w", err)
	}
	pc := pbxConfigs{specs: specs, eng: ecfg, link: lcfg, ami: acfg, log: log}
	if c.bus.url != "" {
		if err := b.openBus(ctx, c, pc); err != nil {
			return err
		}
	} else {
		b.eng = calls.New(pc.defaultConfig())
		b.link = link.New(b.client, b.eng, lcfg)
		if b.sites, err = openSites(c, pc, b.eng, nil); err != nil {
			return fmt.Errorf("--pbx: %w", err)
		}
	}
	ns := &namesState{b.eng}
	if b.sites != nil {
		ns.State = b.sites.Multi()
	}
	st.names.state.Store(ns)
	return nil
}

// openStores opens the stores: phonebook (caller names, contacts) and
// call history, closed last of all. The users whose own contacts name
// their callers are the users file's until the auth service exists, then
// the service's (replaced on reload, directories included).
func (b *bridge) openStores(ctx context.Context, c *serveConfig, users *auth.Users) (err error) {
	usersNow := func() *auth.Users {
		if a := b.authNow.Load(); a != nil {
			return a.Users()
		}
		return users
	}
	if c.phoneCountry == "" {
		b.log.Info("no --phone-country: a number written nationally (0721405516) and internationally (+39 0721 405516) are two numbers for the phonebook; set it (39 for Italy)")
	}
	b.stores, err = openStores(ctx, c, usersNow, b.log)
	return err
}

// openAuth builds the auth service on the stores' session store, the
// directories (--dir-*) that add users to it, and the way a reload sets
// the users file; it reads the stored sessions back now and each time the
// database becomes ready.
func (b *bridge) openAuth(ctx context.Context, c *serveConfig, users *auth.Users) error {
	log, st := b.log, b.stores
	b.auth = auth.NewService(users, auth.Config{TokenTTL: c.tokenTTL, Store: st.sessions, Shared: st.shared, Log: log})
	b.authNow.Store(b.auth)
	dc := c.dir
	dc.snapshotDir = c.dataDir
	dirs, closeDirs, err := openDirectories(ctx, dc, b.auth, users, log)
	if err != nil {
		return err
	}
	b.dirs, b.closeDirs = dirs, closeDirs
	b.setUsers = b.auth.SetUsers
	if dirs != nil {
		b.setUsers = func(u *auth.Users) int {
			n, err := dirs.SetFile(u)
			if err != nil {
				log.Error("users file and directories do not merge: keeping the running users", "err", err)
			}
			return n
		}
	}
	// Stored sessions: now what can be read (the file; the database if it
	// answers already), and the database's each time it becomes ready.
	n, err := b.auth.LoadSessions(ctx)
	log.Info("sessions restored", "sessions", n, "pending", err)
	st.dbReady = func(ctx context.Context) {
		n, err := b.auth.LoadSessions(ctx)
		if err != nil {
			log.Warn("sessions not read back from the database", "err", err)
		}
		log.Info("sessions restored from the database", "sessions", n)
	}
	return nil
}

// amiConfig is the AMI client's configuration from the settings.
func amiConfig(c *serveConfig, log *slog.Logger) ami.Config {
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
	return acfg
}

// listen builds the two HTTP servers, for the API (REST, /ws, the panel)
// and the admin handler, and opens their listeners. Nothing is served
// until Run. On error no listener is left open.
func (b *bridge) listen(c *serveConfig, api, adminHandler http.Handler) (err error) {
	if b.api, err = httpserve.New(httpserve.Config{Addr: c.http, TLSCert: c.tlsCert, TLSKey: c.tlsKey, Log: b.log}, api); err != nil {
		return err
	}
	if b.apiLn, err = b.api.Listen(); err != nil {
		return listenError("http", c.http, err)
	}
	if b.adminLn, err = net.Listen("tcp", c.admin); err != nil {
		b.apiLn.Close()
		return listenError("admin", c.admin, err)
	}
	b.admin = &http.Server{Handler: adminHandler, ReadHeaderTimeout: 5 * time.Second}
	return nil
}

// listenError names the flag that moves a listener whose address could
// not be opened: a port another program holds is the usual reason.
func listenError(flag, addr string, err error) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("%s is in use by another program: choose another address with --%s (port 0: any free port): %w", addr, flag, err)
	}
	return fmt.Errorf("--%s %s: %w", flag, addr, err)
}

// addrs tells where the bridge listens.
func (b *bridge) addrs() bridgeAddrs {
	return bridgeAddrs{HTTP: b.apiLn.Addr().String(), Admin: b.adminLn.Addr().String()}
}

// close releases what newBridge opened and Run does not: the directories,
// the stores and the AMI recording. Call it after Run has returned.
func (b *bridge) close() {
	if b.closeDirs != nil {
		b.closeDirs()
	}
	b.webhooks.close()
	b.closeBus()
	if b.stores != nil {
		b.stores.Close()
	}
	if b.amiRec != nil {
		b.amiRec.Close()
	}
}

// Run starts every component and serves until ctx is done or one of them
// fails, then shuts down in order: REST listener, WebSocket clients (going
// away), admin listener, everything on ctx (link, auth, stores, hooks),
// AMI client (which logs off), history recorder (flushes), webhooks (queue
// to disk). Each goroutine
// below is started in this order and has an owner that waits for it.
func (b *bridge) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup // the goroutines that live as long as ctx
	errc := make(chan error, 4+b.sites.Len())
	// The client has its own lifetime: it must outlive the link so that it
	// can log off after everything else has stopped.
	// On the bus (--bus), the node runs instead: it follows the PBX's op
	// stream and, on the bridge that wins the lease, runs the client and
	// the link (bridge.lead); a bridge's CDR session has its own lifetime.
	stopClient := func() {}
	if b.bus != nil {
		stopClient = b.bus.Run(ctx, &wg, errc)
	} else {
		stopClient = site.GoOwn(func(ctx context.Context) { b.client.Run(ctx) }).Stop
		wg.Go(func() {
			if err := b.link.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
				errc <- fmt.Errorf("link: %w", err)
			}
		})
	}
	stopSites := b.sites.Run(ctx, &wg, errc)
	wg.Go(func() { b.auth.Run(ctx) })
	if b.dirs != nil {
		wg.Go(func() { b.dirs.Run(ctx) })
	}
	// The hub has its own lifetime: it must be running before the first
	// upgrade and stop only after it has said going-away to its clients.
	hub := site.GoOwn(func(ctx context.Context) { b.hub.Run(ctx) })
	sioRun := site.GoOwn(func(ctx context.Context) {
		if b.sio != nil {
			b.sio.Run(ctx)
		}
	})
	wg.Go(func() { b.stores.run(ctx) })
	// The recorder outlives the link so that the last CDRs it saw are
	// written (or spooled) before the database closes.
	rec := site.GoOwn(func(ctx context.Context) {
		if b.stores.recorder != nil {
			b.stores.recorder.Run(ctx)
		}
	})
	// The webhooks outlive the recorder so that its last CDRs are queued.
	whs := site.GoOwn(b.webhooks.run)
	wg.Go(func() {
		if err := b.api.Serve(b.apiLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("http: %w", err)
		}
	})
	wg.Go(func() {
		if err := b.admin.Serve(b.adminLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("admin: %w", err)
		}
	})
	if b.hooks != nil {
		wg.Go(func() { b.hooks.run(ctx, b.ready, b.setUsers, b.api, b.log) })
	}

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errc:
		b.log.Error("stopping", "err", runErr)
	}
	b.log.Info("shutting down")
	if b.hooks != nil {
		b.hooks.notify.Stopping("shutting down")
	}
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	b.api.Shutdown(sctx)
	// Shutdown does not touch hijacked connections: the hub tells its
	// WebSocket clients itself that the server is going away.
	b.hub.Close()
	hub.Stop()
	if b.sio != nil {
		b.sio.Close()
	}
	sioRun.Stop()
	b.admin.Shutdown(sctx)
	cancel()
	wg.Wait()
	stopSites()
	stopClient()
	rec.Stop()
	whs.Stop()
	return runErr
}

// engineConfig is the calls engine's configuration: the PBX's names, the
// stores' name lookups, and auth's opaque channel names for the users
// who may not see numbers (calls.Class NumbersHidden).
func engineConfig(c *serveConfig, in bridgeIn, queueNumbers map[string]string, st *stores) calls.Config {
	cfg := calls.Config{Trunks: splitList(c.trunks), QueueNumbers: queueNumbers, Names: endpointNames(in.users, in.names),
		Cellphones: mainCellphones(in.users), FeedSize: int(c.wsReplay), Opaque: auth.Opaquer{}, Log: in.log.With("component", "calls")}
	if st != nil {
		cfg.NameLookup, cfg.RingLookup = st.Lookup, st.names.ring
	}
	return cfg
}

// autoAnswer is rest's auto-answer of --auto-answer and --auto-answer-off.
func autoAnswer(c *serveConfig) (*rest.AutoAnswer, error) {
	rules, err := rest.ParseAutoAnswerRules(c.autoAnswer)
	if err != nil || rules == nil {
		return nil, err
	}
	off := map[string]bool{}
	for _, u := range strings.Split(c.autoAnswerOff, ",") {
		if u = strings.TrimSpace(u); u != "" {
			off[u] = true
		}
	}
	return &rest.AutoAnswer{Rules: rules, Off: off}, nil
}
