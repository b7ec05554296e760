package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/ctibridge/ctibridge/pbxsim"
)

// runPBXSim is `ctibridge pbxsim`: the simulated Asterisk alone (SIP
// registrar + B2BUA, AMI), for SIPp and softphones. Every flag has a
// CTIBRIDGE_PBXSIM_* environment variable; flags win.
func runPBXSim(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	fs := flag.NewFlagSet("pbxsim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	env := func(k, def string) string {
		if v := getenv("CTIBRIDGE_PBXSIM_" + k); v != "" {
			return v
		}
		return def
	}
	sipAddr := fs.String("sip", env("SIP", pbxsim.DefaultSIPAddr), "SIP listen address, UDP and TCP (`host:port`)")
	amiAddr := fs.String("ami", env("AMI", pbxsim.DefaultAMIAddr), "AMI listen address (`host:port`)")
	amiUser := fs.String("ami-user", env("AMI_USER", pbxsim.DefaultAMIUser), "manager user name accepted")
	amiSecret := fs.String("ami-secret", env("AMI_SECRET", pbxsim.DefaultAMISecret), "manager secret accepted")
	exts := fs.String("extensions", env("EXTENSIONS", pbxsim.DefaultExtensions), "extension `range`s, e.g. 200-299 or 201,202")
	auto := fs.String("auto-answer", env("AUTO_ANSWER", pbxsim.DefaultAutoAnswer), "numbers the simulator answers itself")
	secret := fs.String("sip-secret", env("SIP_SECRET", ""), "digest password of every extension (default: none)")
	boxes := fs.String("mailboxes", env("MAILBOXES", ""), "extension `range`s with a voicemail box: their unanswered calls go to voicemail (default: none)")
	plan := fs.String("plan", env("PLAN", pbxsim.PlanDefault), "dialplan: default, or freepbx (ring group 610 and queue 620 through Local channels, 201's second device 91201, outbound route; docs/pbxsim.md)")
	verbose := fs.Bool("v", false, "log debug messages")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("pbxsim: unexpected argument %q", fs.Arg(0))
	}
	extensions, err := pbxsim.ExtensionRange(*exts)
	if err != nil {
		return err
	}
	autoAnswer, err := pbxsim.ParseRange(*auto)
	if err != nil {
		return err
	}
	var mailboxes []string
	if *boxes != "" {
		if mailboxes, err = pbxsim.ParseRange(*boxes); err != nil {
			return err
		}
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	p, err := pbxsim.New(pbxsim.Config{
		SIPAddr: *sipAddr, AMIAddr: *amiAddr,
		AMIUsers:   map[string]string{*amiUser: *amiSecret},
		Extensions: extensions, AutoAnswer: autoAnswer, SIPSecret: *secret, Mailboxes: mailboxes, Plan: *plan, Log: log,
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "pbxsim: SIP on %s (udp, tcp), AMI on %s (user %q), extensions %s, auto-answer %s\n",
		p.SIPAddr(), p.AMIAddr(), *amiUser, *exts, *auto)
	return p.Run(ctx)
}
