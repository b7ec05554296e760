package webhook

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Event types, as in an event's "type" and in Config.Events.
const (
	TypeRinging  = "ringing"  // a call rings at an extension
	TypeAnswered = "answered" // an extension's call is connected with its counterpart
	TypeHangup   = "hangup"   // an extension's call is over
	TypeCDR      = "cdr"      // a CDR was taken by the recorder (fsynced to its spool)
)

// Types lists every event type, in the order a call produces them.
var Types = []string{TypeRinging, TypeAnswered, TypeHangup, TypeCDR}

// Config is one webhook. Name, URL and Secret are required.
type Config struct {
	// Name identifies the webhook in metrics, logs and its queue's
	// directory: letters, digits, '-' and '_'.
	Name string `yaml:"name"`
	// URL receives the POSTs (http or https).
	URL string `yaml:"url"`
	// Secret keys the HMAC-SHA256 signature (at least 16 bytes). Or
	// SecretFile: a file holding it (one line).
	Secret     string `yaml:"secret"`
	SecretFile string `yaml:"secret_file"`
	// Events are the types sent (Types). Default: all.
	Events []string `yaml:"events"`
	// Extensions, when not empty, limit the events to those extensions
	// (a CDR matches on its src or dst).
	Extensions []string `yaml:"extensions"`
	// Timeout bounds one POST until its response headers. Default 5 s.
	Timeout time.Duration `yaml:"timeout"`
	// RetryMax is the longest wait between attempts while the receiver
	// fails (full jitter from 250 ms, doubling). Default 30 s.
	RetryMax time.Duration `yaml:"retry_max"`
	// MaxQueue bounds the events waiting on disk, in bytes. Default
	// 64 MiB (about 100,000 events); beyond it new events are dropped.
	MaxQueue int64 `yaml:"max_queue_bytes"`
	// Auth, optional, authenticates the POSTs.
	Auth Auth `yaml:"auth"`
}

// Auth is a webhook's authentication: a static bearer token or OAuth2
// client credentials (not both).
type Auth struct {
	Token     string  `yaml:"token"`
	TokenFile string  `yaml:"token_file"`
	OAuth2    *OAuth2 `yaml:"oauth2"`
}

// OAuth2 is an OAuth2 client-credentials grant.
type OAuth2 struct {
	TokenURL     string   `yaml:"token_url"`
	ClientID     string   `yaml:"client_id"`
	ClientSecret string   `yaml:"client_secret"`
	Scopes       []string `yaml:"scopes"`
}

type file struct {
	Webhooks []Config `yaml:"webhooks"`
}

// LoadFile reads a webhooks file (YAML, docs/webhooks.md) and checks
// every webhook in it, reading the secret and token files. Unknown keys
// are errors.
func LoadFile(path string) ([]Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("webhook: %w", err)
	}
	var f file
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("webhook: %s: %w", path, err)
	}
	if len(f.Webhooks) == 0 {
		return nil, fmt.Errorf("webhook: %s: no webhooks listed", path)
	}
	if err := Check(f.Webhooks); err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	return f.Webhooks, nil
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Check validates cfgs and resolves their files in place (SecretFile into
// Secret, TokenFile into Token). Every problem is reported, joined.
func Check(cfgs []Config) error {
	var errs []error
	seen := map[string]bool{}
	for i := range cfgs {
		c := &cfgs[i]
		if err := c.check(); err != nil {
			errs = append(errs, fmt.Errorf("webhook %d (%q): %w", i+1, c.Name, err))
			continue
		}
		if seen[c.Name] {
			errs = append(errs, fmt.Errorf("webhook %d: name %q used twice", i+1, c.Name))
		}
		seen[c.Name] = true
	}
	return errors.Join(errs...)
}

func (c *Config) check() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if !nameRE.MatchString(c.Name) {
		bad("name: want 1 to 64 letters, digits, '-' or '_'")
	}
	if u, err := url.Parse(c.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		bad("url: %q is not an http(s) URL", c.URL)
	}
	if err := readFile(&c.Secret, &c.SecretFile, "secret"); err != nil {
		errs = append(errs, err)
	} else if len(c.Secret) < 16 {
		bad("secret: want at least 16 bytes (secret or secret_file)")
	}
	for _, e := range c.Events {
		if !slices.Contains(Types, e) {
			bad("events: unknown event %q (want %s)", e, strings.Join(Types, ", "))
		}
	}
	for _, x := range c.Extensions {
		if x == "" || strings.ContainsAny(x, " \t,") {
			bad("extensions: %q is not an extension number", x)
		}
	}
	if c.Timeout < 0 || c.RetryMax < 0 || c.MaxQueue < 0 {
		bad("timeout, retry_max and max_queue_bytes must not be negative")
	}
	if c.MaxQueue > 0 && c.MaxQueue < 64<<10 {
		bad("max_queue_bytes: %d is below the minimum of 65536", c.MaxQueue)
	}
	a := &c.Auth
	if err := readFile(&a.Token, &a.TokenFile, "auth.token"); err != nil {
		errs = append(errs, err)
	}
	if o := a.OAuth2; o != nil {
		if a.Token != "" {
			bad("auth: token and oauth2 both set; choose one")
		}
		if u, err := url.Parse(o.TokenURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("auth.oauth2.token_url: %q is not an http(s) URL", o.TokenURL)
		}
		if o.ClientID == "" || o.ClientSecret == "" {
			bad("auth.oauth2: client_id and client_secret are required")
		}
	}
	return errors.Join(errs...)
}

// readFile sets *v from the file *path (trimmed) when one is named, and
// forgets the name: checking again keeps what was read.
func readFile(v, path *string, what string) error {
	if *path == "" {
		return nil
	}
	if *v != "" {
		return fmt.Errorf("%s: both %s and %s_file set; choose one", what, what, what)
	}
	b, err := os.ReadFile(*path)
	if err != nil {
		return fmt.Errorf("%s_file: %w", what, err)
	}
	*v, *path = strings.TrimSpace(string(b)), ""
	return nil
}
