package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/pbxsim"
)

// demoConfig is what `ctibridge demo` reads from its flags.
type demoConfig struct {
	http, admin, sip, ami string
	phones                int64
	callEvery             time.Duration
	talk                  time.Duration
	ring                  time.Duration
	ringSpread            time.Duration // phones ring from ring to ring+ringSpread
	autoAnswer            bool          // phones register as pbxsim-phone: auto-answer
	dataDir               string
	logLevel              string
	webhooks              string
	plan                  string
	popupLink             string
}

// demoMaxPhones: the demo's phones are 201 and up, and 600 is its queue
// (then 6xx answer by themselves, 701-720 park, 800 is a conference).
const demoMaxPhones = 399

// demoMobile is the cellphone the demo gives the user of extension x: a
// number the simulated PBX answers itself, as a mobile network would.
func demoMobile(x string) string { return "34700" + x }

func demoSettings(c *demoConfig) *settings {
	s := &settings{}
	s.Str(&c.http, "http", "127.0.0.1:8080", "REST, WebSocket and web panel listener")
	s.Str(&c.admin, "admin", "127.0.0.1:9090", "listener for /healthz, /readyz, /metrics, /debug/pprof")
	s.Str(&c.sip, "sip", "127.0.0.1:0", "SIP address of the simulated PBX (port 0: any free port)")
	s.Str(&c.ami, "ami", "127.0.0.1:0", "AMI address of the simulated PBX (port 0: any free port)")
	s.Int(&c.phones, "phones", 8, "simulated phones, extensions 201 and up (3 to 399)")
	s.Dur(&c.callEvery, "call-every", 4*time.Second, "mean interval between calls the phones place (0: none)")
	s.Dur(&c.talk, "talk", 20*time.Second, "mean talk time of a simulated call")
	s.Dur(&c.ring, "ring", 3*time.Second, "how long a simulated phone rings before it answers")
	s.Dur(&c.ringSpread, "ring-spread", 6*time.Second, "the phones ring for different times, between --ring and --ring plus this, so that a ringing colleague can be picked up")
	s.Bool(&c.autoAnswer, "auto-answer", true, "the phones answer at once the first leg of a click-to-call, pickup or spy of their user (they register with a user agent that --auto-answer's default table names)")
	s.Str(&c.dataDir, "data-dir", "./ctibridge-data", "embedded database and spool directory")
	s.Str(&c.logLevel, "log-level", "warn", "log level: debug, info, warn or error")
	s.Str(&c.webhooks, "webhooks", "", "webhooks file (YAML; see docs/webhooks.md): the simulated calls' events POSTed to your receiver")
	s.Str(&c.plan, "pbx-plan", pbxsim.PlanDefault, "dialplan of the simulated PBX: default (queue 600), or freepbx (FreePBX/NethVoice topologies: ring group 610 and queue 620 through Local channels, 201's second device 91201, outbound route for numbers of 5+ digits; see docs/pbxsim.md)")
	s.Str(&c.popupLink, "popup-link", "", "customer card the incoming call pop-up links to (an http(s) URL template with {number} and {name})")
	return s
}

// demoUser is one login the demo prints.
type demoUser struct {
	Username, Password, Role string
	Endpoints                []string
}

// demoInfo tells a caller (the terminal, or a test) what the demo runs.
type demoInfo struct {
	URL    string // the web panel and REST API
	Bridge bridgeAddrs
	PBX    *pbxsim.PBX
	Phones map[string]*pbxsim.Phone // by extension
	Users  []demoUser
}

// demoPhoneNames are the demo's people: the recordings' names first.
var demoPhoneNames = []string{"Alice Rossi", "Bob Verdi", "Carol Bianchi", "Dave Russo", "Erin Romano",
	"Frank Gallo", "Grace Costa", "Heidi Fontana", "Ivan Conti", "Judy Ricci", "Karl Marino", "Lena Greco"}

// demo runs everything on loopback: the simulated PBX, simulated phones
// placing and answering calls, and the bridge connected to the PBX over
// real AMI. It prints the URL and the logins and runs until ctx is done.
func demo(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var c demoConfig
	if err := demoSettings(&c).Parse("demo", args, getenv, stderr); err != nil {
		return err
	}
	log, err := newLogger(stderr, "text", c.logLevel)
	if err != nil {
		return err
	}
	return runDemo(ctx, c, log, func(d demoInfo) {
		fmt.Fprintf(stdout, "\nctibridge demo is running: %s\n\n", d.URL)
		fmt.Fprintf(stdout, "  logins (user / password / role / phones):\n")
		for _, u := range d.Users {
			fmt.Fprintf(stdout, "    %-8s %-10s %-9s %v\n", u.Username, u.Password, u.Role, u.Endpoints)
		}
		fmt.Fprintf(stdout, "\n  simulated PBX: SIP %s (register 201-%d, no password), AMI %s (ctibridge/ctibridge)\n",
			d.PBX.SIPAddr(), 200+len(d.Phones), d.PBX.AMIAddr())
		fmt.Fprintf(stdout, "  metrics: http://%s/metrics\n", d.Bridge.Admin)
		fmt.Fprintf(stdout, "  ports: the panel on %s (--http), metrics on %s (--admin); either flag moves it\n\n  Ctrl-C stops it.\n", d.Bridge.HTTP, d.Bridge.Admin)
	})
}

// runDemo is demo without the flags and the printing; started receives
// what runs once everything is up.
func runDemo(ctx context.Context, c demoConfig, log *slog.Logger, started func(demoInfo)) error {
	if c.phones < 3 || c.phones > demoMaxPhones {
		return fmt.Errorf("demo: --phones must be between 3 and %d (extensions 201-%d, below the queue's 600), got %d", demoMaxPhones, 200+demoMaxPhones, c.phones)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var exts []pbxsim.Extension
	var boxes []string // every phone has a voicemail box, as on FreePBX
	for i := range int(c.phones) {
		name := "Ext " + strconv.Itoa(201+i)
		if i < len(demoPhoneNames) {
			name = demoPhoneNames[i]
		}
		exts = append(exts, pbxsim.Extension{Number: strconv.Itoa(201 + i), Name: name})
		boxes = append(boxes, strconv.Itoa(201+i))
	}
	// The demo's queue has FreePBX's default service level (60 s), so
	// the panel shows one. The first two users' mobiles answer by
	// themselves, beside pbxsim's own 6xx.
	pbx, err := pbxsim.New(pbxsim.Config{SIPAddr: c.sip, AMIAddr: c.ami, Extensions: exts, Mailboxes: boxes,
		AutoAnswer: demoAutoAnswer(exts), QueueServiceLevel: 60 * time.Second, Plan: c.plan, Log: log.With("component", "pbxsim")})
	if err != nil {
		return demoListenError(c, err)
	}
	special, endpoints := demoPlan(c.plan, exts)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	errc := make(chan error, 3)
	wg.Go(func() {
		if err := pbx.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			errc <- fmt.Errorf("pbxsim: %w", err)
		}
	})

	phones := map[string]*pbxsim.Phone{}
	for i, x := range endpoints {
		pc := pbxsim.PhoneConfig{Exten: x.Number, Server: pbx.SIPAddr(), RingTime: c.ring + time.Duration(i%4)*c.ringSpread/3,
			Log: log.With("component", "phone", "exten", x.Number)}
		if c.autoAnswer {
			pc.UserAgent = "pbxsim-phone " + x.Number
		}
		ph, err := pbxsim.NewPhone(pc)
		if err != nil {
			return err
		}
		wg.Go(func() { ph.Run(ctx) })
		phones[x.Number] = ph
	}
	for x, ph := range phones {
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
		err := ph.Register(rctx, time.Hour)
		rcancel()
		if err != nil {
			return fmt.Errorf("demo: phone %s: register: %w", x, err)
		}
	}

	users, logins, err := demoUsers(exts)
	if err != nil {
		return err
	}
	bc := demoBridgeConfig(&c, pbx.AMIAddr())
	wg.Go(func() {
		names := map[string]string{}
		for _, x := range exts {
			names[x.Number] = x.Name
		}
		err := runBridge(ctx, bc, bridgeIn{users: users, names: names, log: log, started: func(a bridgeAddrs) {
			if started != nil {
				started(demoInfo{URL: "http://" + a.HTTP + "/", Bridge: a, PBX: pbx, Phones: phones, Users: logins})
			}
		}})
		if err != nil && !errors.Is(err, context.Canceled) {
			errc <- fmt.Errorf("bridge: %w", err)
		}
	})
	if c.callEvery > 0 {
		wg.Go(func() { demoTraffic(ctx, phones, special, &c, log) })
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-errc:
		return err
	}
}

// demoBridgeConfig is the demo's bridge: serve's defaults, pointed at
// the simulator's AMI at ami.
func demoBridgeConfig(c *demoConfig, ami string) *serveConfig {
	var bc serveConfig
	serveSettings(&bc)
	bc.ami, bc.amiUser, bc.amiSecret = ami, pbxsim.DefaultAMIUser, pbxsim.DefaultAMISecret
	bc.http, bc.admin, bc.dataDir = c.http, c.admin, c.dataDir
	bc.webhooks = c.webhooks
	bc.popupLink = c.popupLink
	bc.accessLogEvery = -1
	if c.plan != pbxsim.PlanFreePBX {
		bc.queueNumbers = pbxsim.DefaultQueue + "=" + pbxsim.DefaultQueueNumber
	}
	// Italy, NethCTI's installed base: 0721405516 and +39 0721 405516 are
	// one number in the demo's phonebook.
	bc.phoneCountry = "39"
	// NethVoice's own clients work against the demo too (/api, /webrest).
	bc.nethcti.on = true
	return &bc
}

// demoPlan is what the simulated callers dial besides the phones (the
// queue; on the freepbx plan also the ring group and an outside number)
// and the endpoints that get a phone (on the freepbx plan also 201's
// second device).
func demoPlan(plan string, exts []pbxsim.Extension) (special []string, endpoints []pbxsim.Extension) {
	endpoints = append(endpoints, exts...)
	if plan != pbxsim.PlanFreePBX {
		return []string{pbxsim.DefaultQueueNumber}, endpoints
	}
	return []string{pbxsim.DefaultFreePBXQueue, pbxsim.DefaultRingGroup, "0612345678"},
		append(endpoints, pbxsim.Extension{Number: "91201"})
}

// demoAutoAnswer is the numbers the simulated PBX answers itself:
// pbxsim's 6xx and the mobiles of the first two users.
func demoAutoAnswer(exts []pbxsim.Extension) []string {
	auto, _ := pbxsim.ParseRange(pbxsim.DefaultAutoAnswer) // a constant range
	return append(auto, demoMobile(exts[0].Number), demoMobile(exts[1].Number))
}

// demoListenError names the flag that moves the simulated PBX's SIP or
// AMI listener when its address is taken.
func demoListenError(c demoConfig, err error) error {
	if !errors.Is(err, syscall.EADDRINUSE) {
		return err
	}
	return fmt.Errorf("demo: the simulated PBX's address is in use by another program (--sip %s, --ami %s): choose others with --sip and --ami (port 0: any free port): %w", c.sip, c.ami, err)
}

// demoUsers makes the demo's logins: an admin, an operator on the third
// phone acting for the group, and users owning the first two phones.
func demoUsers(exts []pbxsim.Extension) (*auth.Users, []demoUser, error) {
	logins := []demoUser{
		{Username: "admin", Password: "admin", Role: "admin"},
		{Username: "operator", Password: "operator", Role: "operator", Endpoints: []string{exts[2].Number}},
		{Username: "alice", Password: "alice", Role: "user", Endpoints: []string{exts[0].Number}},
		{Username: "bob", Password: "bob", Role: "user", Endpoints: []string{exts[1].Number}},
	}
	var list []auth.User
	for _, l := range logins {
		// The lowest bcrypt cost: these passwords are printed anyway.
		hash, err := auth.HashPassword(l.Password, 4)
		if err != nil {
			return nil, nil, err
		}
		role := map[string]auth.Role{"admin": auth.RoleAdmin, "operator": auth.RoleOperator, "user": auth.RoleUser}[l.Role]
		u := auth.User{Username: l.Username, Name: l.Username, PasswordHash: hash, Role: role, Endpoints: l.Endpoints, Groups: []string{"demo"}}
		if l.Role == "user" {
			u.Cellphone = demoMobile(l.Endpoints[0])
		}
		list = append(list, u)
	}
	users, err := auth.NewUsers(list)
	return users, logins, err
}

// demoTraffic makes idle phones call each other at random, about one call
// every c.callEvery, each lasting about c.talk; one call in four goes to one
// of special (a queue, a ring group, an outside number).
func demoTraffic(ctx context.Context, phones map[string]*pbxsim.Phone, special []string, c *demoConfig, log *slog.Logger) {
	exts := make([]string, 0, len(phones))
	for x := range phones {
		exts = append(exts, x)
	}
	var busy sync.Map
	jitter := func(d time.Duration) time.Duration { return d/2 + rand.N(d) }
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(jitter(c.callEvery)):
		}
		from, to := exts[rand.N(len(exts))], exts[rand.N(len(exts))]
		if rand.N(4) == 0 && from != "202" && from != "203" && from != "204" {
			to = special[rand.N(len(special))] // members of the queue and ring group call elsewhere
		}
		isSpecial := slices.Contains(special, to)
		if from == to {
			continue
		}
		if _, taken := busy.LoadOrStore(from, true); taken {
			continue
		}
		if _, taken := busy.LoadOrStore(to, true); taken && !isSpecial {
			busy.Delete(from)
			continue
		}
		wg.Go(func() {
			defer busy.Delete(from)
			defer busy.Delete(to)
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			call, err := phones[from].Call(cctx, to)
			cancel()
			if err != nil {
				log.Debug("demo call not answered", "from", from, "to", to, "err", err)
				return
			}
			select {
			case <-ctx.Done():
			case <-call.Done():
				return
			case <-time.After(jitter(c.talk)):
			}
			hctx, hcancel := context.WithTimeout(context.Background(), 2*time.Second)
			call.Hangup(hctx)
			hcancel()
		})
	}
}
