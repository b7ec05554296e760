package pbxsim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/ami/amievent"
	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"
)

// ext is the runtime state of one extension.
type ext struct {
	num, name string
	contact   *contact // nil when not registered
	chans     map[*channel]struct{}
	dev       devState // last device state announced
	hint      devState // last state of its hint announced (a device's is its user's)
	user      string   // a device's user (freepbx plan's Devices); "" for a user
	devices   []string // a user's devices, sorted
}

// contact is a registered binding.
type contact struct {
	uri       sip.Uri
	source    string // host:port the REGISTER came from
	tcp       bool
	expires   time.Time
	userAgent string
	callID    string
}

// PBX is the simulated Asterisk. Create it with New, then Run it. All
// methods are safe for concurrent use.
type PBX struct {
	// Immutable after New.
	cfg      Config
	log      *slog.Logger
	auto     map[string]bool
	names    map[string]string // every known endpoint's caller ID name
	udp      net.PacketConn
	tcp      net.Listener
	amiLn    net.Listener
	ua       *sipgo.UserAgent
	sipSrv   *sipgo.Server
	udpCli   *sipgo.Client
	tcpCli   *sipgo.Client
	udpDUA   *sipgo.DialogUA
	tcpDUA   *sipgo.DialogUA
	amiSrv   *ami.Server
	nonceKey [16]byte
	started  time.Time

	runCtx  context.Context // set by Run before serving; ends when Run is asked to stop
	runStop context.CancelFunc
	// sipCtx bounds the SIP exchanges of calls (BYE, CANCEL, NOTIFY): at
	// shutdown it ends shortGrace after the BYEs went out, so that phones
	// that never answer do not hold Run up.
	sipCtx    context.Context
	sipCancel context.CancelFunc
	calls     sync.WaitGroup // every call goroutine (see track)
	ran       atomic.Bool

	feat features // AstDB, custom device states: guarded by feat.mu

	mu        sync.Mutex // guards everything below, and every channel's fields
	exts      map[string]*ext
	channels  map[string]*channel // by name
	dialogs   map[string]*channel // by sipgo dialog ID (Call-ID + local tag + remote tag)
	parked    map[int]*channel    // parking space -> parkee
	queue     *queueState
	mailboxes map[string]*mailbox    // by extension
	confs     map[string]*conference // live ConfBridge rooms by name
	chanSeq   uint64                 // next channel number
	localSeq  uint64                 // next Local channel pair number
	stats     Stats
}

// Stats counts what the simulator did.
type Stats struct {
	Registers  uint64 // REGISTER requests accepted
	Calls      uint64 // calls started (inbound INVITEs and Originates)
	Answered   uint64 // calls bridged or answered by the simulator
	Failed     uint64 // calls that ended unanswered
	Channels   int    // channels alive now
	AMIDropped uint64 // AMI sessions dropped (slow or garbage)
}

// New validates cfg, binds the SIP (UDP and TCP) and AMI sockets and
// returns the PBX, not yet serving: call Run.
func New(cfg Config) (*PBX, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	p := &PBX{
		cfg: cfg, log: cfg.Log.With("component", "pbxsim"),
		auto: map[string]bool{}, names: map[string]string{},
		exts: map[string]*ext{}, channels: map[string]*channel{},
		dialogs: map[string]*channel{}, parked: map[int]*channel{},
		started: cfg.Now(), queue: newQueueState(cfg.QueueMembers, cfg.Now(), cfg.Plan == PlanFreePBX),
	}
	p.sipCtx, p.sipCancel = context.WithCancel(context.Background())
	rand32(p.nonceKey[:])
	for _, n := range cfg.AutoAnswer {
		p.auto[n] = true
	}
	p.confs = map[string]*conference{}
	p.mailboxes = map[string]*mailbox{}
	for _, n := range cfg.Mailboxes {
		p.mailboxes[n] = &mailbox{num: n}
	}
	for _, e := range cfg.Extensions {
		p.exts[e.Number] = &ext{num: e.Number, name: e.Name, chans: map[*channel]struct{}{}, dev: devUnavailable, hint: devUnavailable}
		p.names[e.Number] = e.Name
	}
	if err := p.listen(); err != nil {
		return nil, err
	}
	host, port := p.sipHostPort()
	ua, err := sipgo.NewUA(sipgo.WithUserAgent("Asterisk PBX 22.10.1"), sipgo.WithUserAgentHostname(host),
		sipgo.WithUserAgentTransactionLayerOptions(sip.WithTransactionLayerUnhandledResponseHandler(p.unhandledResponse)))
	if err != nil {
		p.closeListeners()
		return nil, fmt.Errorf("pbxsim: sip: %w", err)
	}
	p.ua = ua
	p.sipSrv, _ = sipgo.NewServer(ua, sipgo.WithServerLogger(p.log))
	hp := net.JoinHostPort(host, strconv.Itoa(port))
	p.udpCli, _ = sipgo.NewClient(ua, sipgo.WithClientAddr(hp), sipgo.WithClientConnectionAddr(hp), sipgo.WithClientLogger(p.log))
	p.tcpCli, _ = sipgo.NewClient(ua, sipgo.WithClientHostname(host), sipgo.WithClientLogger(p.log))
	uri := sip.Uri{Scheme: "sip", User: "asterisk", Host: host, Port: port}
	p.udpDUA = &sipgo.DialogUA{Client: p.udpCli, ContactHDR: sip.ContactHeader{Address: uri}}
	turi := uri
	turi.UriParams = sip.NewParams()
	turi.UriParams.Add("transport", "tcp")
	p.tcpDUA = &sipgo.DialogUA{Client: p.tcpCli, ContactHDR: sip.ContactHeader{Address: turi}}

	p.amiSrv = ami.NewServer(ami.ServerConfig{Users: cfg.AMIUsers, Log: p.log, Started: p.started, Trace: cfg.AMITrace})
	p.registerSIP()
	p.registerAMI()
	p.registerFeatures()
	p.addDevices()
	p.registerConfBridge()
	return p, nil
}

func (p *PBX) listen() error {
	host, port, err := net.SplitHostPort(p.cfg.SIPAddr)
	if err != nil {
		return fmt.Errorf("pbxsim: sip address: %w", err)
	}
	// Port 0: take a free UDP port and try the same number for TCP.
	for attempt := 0; ; attempt++ {
		udp, err := net.ListenPacket("udp", net.JoinHostPort(host, port))
		if err != nil {
			return fmt.Errorf("pbxsim: sip udp: %w", err)
		}
		tcp, err := net.Listen("tcp", udp.LocalAddr().String())
		if err != nil {
			udp.Close()
			if port == "0" && attempt < 20 {
				continue
			}
			return fmt.Errorf("pbxsim: sip tcp: %w", err)
		}
		p.udp, p.tcp = udp, tcp
		break
	}
	l, err := net.Listen("tcp", p.cfg.AMIAddr)
	if err != nil {
		p.closeListeners()
		return fmt.Errorf("pbxsim: ami: %w", err)
	}
	p.amiLn = l
	return nil
}

func (p *PBX) closeListeners() {
	if p.udp != nil {
		p.udp.Close()
	}
	if p.tcp != nil {
		p.tcp.Close()
	}
	if p.amiLn != nil {
		p.amiLn.Close()
	}
}

func (p *PBX) sipHostPort() (string, int) {
	a := p.udp.LocalAddr().(*net.UDPAddr)
	host := a.IP.String()
	if a.IP.IsUnspecified() {
		host = "127.0.0.1"
	}
	return host, a.Port
}

// SIPAddr is the bound SIP address (UDP and TCP), "host:port".
func (p *PBX) SIPAddr() string { return p.udp.LocalAddr().String() }

// AMIAddr is the bound manager address, "host:port".
func (p *PBX) AMIAddr() string { return p.amiLn.Addr().String() }

// AMIServer is the manager server, for its statistics.
func (p *PBX) AMIServer() *ami.Server { return p.amiSrv }

// Stats returns the counters so far.
func (p *PBX) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	s.Channels = len(p.channels)
	st := p.amiSrv.Stats()
	s.AMIDropped = st.Slow + st.Garbage
	return s
}

// Channels returns the names of the live channels, sorted.
func (p *PBX) Channels() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]string, 0, len(p.channels))
	for n := range p.channels {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Registered reports whether an extension has a live contact.
func (p *PBX) Registered(exten string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.exts[exten]
	return e != nil && e.contact != nil
}

// Run serves SIP and AMI until ctx ends. Then it hangs up every call,
// closes the sockets and returns once all its goroutines have finished. It
// returns nil after a normal shutdown. Run may be called once.
func (p *PBX) Run(ctx context.Context) error {
	if !p.ran.CompareAndSwap(false, true) {
		return errors.New("pbxsim: Run called twice")
	}
	runCtx, stop := context.WithCancel(context.Background())
	p.mu.Lock()
	p.runCtx, p.runStop = runCtx, stop
	p.mu.Unlock()

	var wg sync.WaitGroup
	errc := make(chan error, 3)
	wg.Add(4)
	go func() { defer wg.Done(); errc <- p.sipSrv.ServeUDP(p.udp) }()
	go func() { defer wg.Done(); errc <- p.sipSrv.ServeTCP(p.tcp) }()
	waitServing(p.ua, p.udp.LocalAddr().String())
	go func() {
		defer wg.Done()
		if err := p.amiSrv.Serve(p.amiLn); err != nil && !errors.Is(err, ami.ErrServerClosed) {
			errc <- err
		}
	}()
	go func() { defer wg.Done(); p.expiryLoop(runCtx) }()
	p.log.Info("pbxsim listening", "sip", p.SIPAddr(), "ami", p.AMIAddr())

	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
		err = fmt.Errorf("pbxsim: serve: %w", err)
	}
	// Hang up what is still up, politely (BYE or CANCEL to each leg), then
	// close everything; answers to our BYEs are awaited shutdownGrace.
	p.mu.Lock()
	stop() // under p.mu: track refuses new calls from here on
	p.mu.Unlock()
	grace := time.AfterFunc(shutdownGrace, p.sipCancel)
	defer grace.Stop()
	defer p.sipCancel()
	done := make(chan struct{})
	go func() { p.calls.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		p.log.Warn("pbxsim calls still running at shutdown")
	}
	p.amiSrv.Close()
	p.udp.Close()
	p.tcp.Close()
	p.ua.Close()
	wg.Wait()
	<-done
	return err
}

// shutdownGrace is how long Run waits for the answers to the BYEs it
// sends at shutdown.
const shutdownGrace = 500 * time.Millisecond

// track counts a call goroutine in p.calls, which Run waits for, and
// returns the run context; ok is false once Run is stopping (or before
// it runs): then the call must not start.
func (p *PBX) track() (ctx context.Context, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.runCtx == nil || p.runCtx.Err() != nil {
		return nil, false
	}
	p.calls.Add(1)
	return p.runCtx, true
}

// ctxRun is the run context, or a cancelled one before Run.
func (p *PBX) ctxRun() context.Context {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.runCtx == nil {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return ctx
	}
	return p.runCtx
}

// emit broadcasts events to every AMI session. Callers hold p.mu, which
// keeps the order of events the order of state changes.
func (p *PBX) emit(msgs ...ami.Message) {
	for _, m := range msgs {
		if err := p.amiSrv.Broadcast(m); err != nil {
			p.log.Warn("pbxsim event not sent", "err", err)
		}
	}
}

// newChannel creates a channel of endpoint and indexes it. p.mu held.
func (p *PBX) newChannel(c *call, endpoint string) *channel {
	n := p.chanSeq
	p.chanSeq++
	now := p.cfg.Now()
	ch := &channel{
		call: c, endpoint: endpoint,
		name:     fmt.Sprintf("PJSIP/%s-%08x", endpoint, n),
		uniqueid: fmt.Sprintf("%d.%d", now.Unix(), n),
		context:  p.cfg.Context, priority: 1, created: now,
	}
	ch.cidNum, ch.cidName = endpoint, p.names[endpoint]
	if e := p.exts[endpoint]; e != nil && e.user != "" {
		ch.cidNum = e.user // a device calls and is called as its user
	}
	p.channels[ch.name] = ch
	if e := p.exts[endpoint]; e != nil {
		e.chans[ch] = struct{}{}
	}
	return ch
}

// dropChannel forgets a hung-up channel. p.mu held.
func (p *PBX) dropChannel(ch *channel) {
	delete(p.channels, ch.name)
	if ch.dialogID != "" && ch.srv == nil {
		delete(p.dialogs, ch.dialogID) // a server dialog is forgotten by its queue (startSrvQueue)
	}
	if e := p.exts[ch.endpoint]; e != nil {
		delete(e.chans, ch)
	}
}

// updateDevice recomputes an endpoint's device state and its hint's (a
// user's hint covers its devices, as FreePBX's hint 201 =
// PJSIP/201&PJSIP/91201) and announces a change with ExtensionStatus and
// DeviceStateChange, and QueueMemberStatus for a member. p.mu held.
func (p *PBX) updateDevice(endpoint string) {
	e := p.exts[endpoint]
	if e == nil {
		return
	}
	d := p.deviceState(e)
	u := e
	if e.user != "" {
		if u = p.exts[e.user]; u == nil {
			u = e
		}
	}
	devChanged := d != e.dev
	e.dev = d
	h := u.dev
	for _, n := range u.devices {
		if x := p.exts[n]; x != nil {
			h = aggregate(h, x.dev)
		}
	}
	hintChanged := h != u.hint
	u.hint = h
	if hintChanged {
		st, txt := h.extStatus()
		hint := "PJSIP/" + u.num
		for _, n := range u.devices {
			hint += "&PJSIP/" + n
		}
		p.emit(ami.NewMessage(append(amievent.Head(ami.EventExtensionStatus, "call,all", 7),
			ami.Header{Key: "Exten", Value: u.num}, ami.Header{Key: "Context", Value: p.cfg.Context},
			ami.Header{Key: "Hint", Value: hint},
			ami.Header{Key: "Status", Value: strconv.Itoa(st)}, ami.Header{Key: "StatusText", Value: txt})...))
	}
	if devChanged {
		p.emit(ami.NewMessage(append(amievent.Head(ami.EventDeviceStateChange, "call,all", 4),
			ami.Header{Key: "Device", Value: "PJSIP/" + e.num}, ami.Header{Key: "State", Value: d.device()})...))
	}
	if m := p.queue.byNum[u.num]; m != nil && (hintChanged || devChanged && e == u) {
		p.emit(p.queueMemberEvent(m)) // app_queue follows its members' devices
	}
}

// deviceState is e's own device state from its channels. p.mu held.
func (p *PBX) deviceState(e *ext) devState {
	var inuse, ringing, hold bool
	for ch := range e.chans {
		switch {
		case ch.gone:
		case ch.onHold:
			hold = true
		case ch.state == stateUp || (ch.state == stateRing && ch.progressed):
			inuse = true
		case ch.state == stateRinging:
			ringing = true
		}
	}
	switch {
	case hold:
		return devOnHold
	case inuse && ringing:
		return devRingInUse
	case inuse:
		return devInUse
	case ringing:
		return devRinging
	case e.contact == nil:
		return devUnavailable
	}
	return devNotInUse
}

// aggregate joins two devices' states into their hint's, as
// ast_devstate_aggregate: an unavailable device counts for nothing,
// ringing and in use together are RINGINUSE.
func aggregate(x, y devState) devState {
	switch {
	case x == devUnavailable:
		return y
	case y == devUnavailable || x == y:
		return x
	}
	rank := func(d devState) int {
		return [...]int{devNotInUse: 0, devInUse: 3, devUnavailable: -1, devRinging: 2, devRingInUse: 5, devOnHold: 4}[d]
	}
	if (x == devRinging && (y == devInUse || y == devOnHold)) || (y == devRinging && (x == devInUse || x == devOnHold)) {
		return devRingInUse
	}
	if rank(x) >= rank(y) {
		return x
	}
	return y
}

// waitServing waits until sipgo's transport layer holds the UDP listener,
// so that requests we send leave from it (ServeUDP registers it from its
// own goroutine).
func waitServing(ua *sipgo.UserAgent, addr string) {
	for i := 0; i < 400; i++ {
		if c, err := ua.TransportLayer().GetConnection("udp", addr); err == nil && c != nil {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}
