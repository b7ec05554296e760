package main

import (
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/nethcti"
	"github.com/ctibridge/ctibridge/nethcti/sio"
)

// nethctiConfig is the NethCTI front's settings (docs/nethcti-compat.md).
type nethctiConfig struct {
	on            bool
	secretFile    string
	endpointTypes string
	featureCodes  string
	phoneUser     string
	phonePassword string
	phones        []nethcti.PhoneRule // the file's nethcti-phones section; nil: nethcti.DefaultPhones
}

// nethctiSettings adds the front's settings, and the file's
// nethcti-phones section, to s.
func nethctiSettings(s *settings, c *nethctiConfig) {
	s.Bool(&c.on, "nethcti", false, "serve NethVoice's clients (CTI web app, phone-island, NethLink) at /api/..., /webrest/... and their socket.io at /api/ws and /socket.io (docs/nethcti-compat.md)")
	s.Str(&c.secretFile, "nethcti-secret-file", "", "file holding the secret that signs the NethCTI tokens (default <data-dir>/nethcti-secret, made at first start)")
	s.Str(&c.endpointTypes, "nethcti-endpoint-types", "", "NethCTI device types by extension prefix, prefix=type,... with type webrtc, nethlink or mobile (92=webrtc,93=nethlink); others are physical")
	s.Str(&c.featureCodes, "nethcti-feature-codes", "", "the PBX's feature codes the NethCTI clients read, name=code,... (default audio_test=*41)")
	s.Str(&c.phoneUser, "nethcti-phone-user", "", "web user of the desk phones, for their action URLs (answer, hold, mute)")
	s.Str(&c.phonePassword, "nethcti-phone-password", "", "web password of the desk phones (prefer the env var or the file to a flag)")
	if s.Sections == nil {
		s.Sections = map[string]func(*yaml.Node) error{}
	}
	s.Sections["nethcti-phones"] = func(n *yaml.Node) error {
		if n.Kind != yaml.SequenceNode {
			return errors.New("want a list of {vendor, match, answer, hold, mute}")
		}
		c.phones = nil
		for _, item := range n.Content {
			if err := knownKeys(item, "vendor", "match", "answer", "hold", "mute"); err != nil {
				return fmt.Errorf("line %d: %w", item.Line, err)
			}
			var r struct{ Vendor, Match, Answer, Hold, Mute string }
			if err := item.Decode(&r); err != nil {
				return fmt.Errorf("line %d: %w", item.Line, err)
			}
			c.phones = append(c.phones, nethcti.PhoneRule{Vendor: r.Vendor, Match: r.Match, Answer: r.Answer, Hold: r.Hold, Mute: r.Mute})
		}
		return nil
	}
}

// parseEndpointTypes reads --nethcti-endpoint-types
// (nethcti.ParseEndpointTypes).
func parseEndpointTypes(s string) (func(string) string, error) {
	f, err := nethcti.ParseEndpointTypes(splitList(s))
	if err != nil {
		return nil, configError{fmt.Errorf("nethcti-endpoint-types: %w", err)}
	}
	return f, nil
}

// parseFeatureCodes reads --nethcti-feature-codes (name=code,...); nil
// for none given (nethcti.DefaultFeatureCodes).
func parseFeatureCodes(s string) (map[string]string, error) {
	var out map[string]string
	for _, f := range splitList(s) {
		name, code, ok := strings.Cut(f, "=")
		name, code = strings.TrimSpace(name), strings.TrimSpace(code)
		if !ok || name == "" || code == "" || strings.Trim(code, "0123456789*#") != "" {
			return nil, configError{fmt.Errorf("nethcti-feature-codes: %q is not name=code (a code of digits, * and #)", f)}
		}
		if out == nil {
			out = map[string]string{}
		}
		out[name] = code
	}
	return out, nil
}

// openNethCTI builds the front over the native API and mounts it at
// /api/ and /webrest/ of mux, and NethCTI's socket.io at sio.Paths;
// nothing without --nethcti. The front's persistent tokens are read back
// with the stores' background work; the socket.io server runs with the
// hub (Run).
func (b *bridge) openNethCTI(c *serveConfig, api http.Handler, state sio.State, mux *http.ServeMux) error {
	nc := c.nethcti
	if !nc.on {
		return nil
	}
	path := nc.secretFile
	if path == "" {
		path = filepath.Join(c.dataDir, "nethcti-secret")
	}
	secret, err := nethcti.LoadSecret(path)
	if err != nil {
		return fmt.Errorf("--nethcti-secret-file: %w", err)
	}
	types, err := parseEndpointTypes(nc.endpointTypes)
	if err != nil {
		return err
	}
	codes, err := parseFeatureCodes(nc.featureCodes)
	if err != nil {
		return err
	}
	var store nethcti.Store = nethcti.NewMemStore()
	if b.stores.gate != nil {
		store = nethcti.NewSQLStore(b.stores.gate.Conn())
	} else {
		b.log.Warn("no local database: NethCTI settings and persistent tokens live in memory only")
	}
	phone := nethcti.NewPhoneClient(nc.phoneUser, nc.phonePassword)
	b.stores.closers = append(b.stores.closers, phone.Close)
	cfg := nethcti.Config{Auth: b.auth, API: api, State: state, Secret: secret, Store: store, EndpointTypes: types,
		Phones: nc.phones, Phone: phone, FeatureCodes: codes, Phonebook: b.stores.phonebook, ActionTimeout: c.actionTimeout, Log: b.log}
	if b.client != nil {
		cfg.PBX = b.client
	}
	if b.bus != nil {
		cfg.PBX = b.bus
	}
	cfg.OnDefaultDevice = func(username, exten string) {
		if b.sio != nil {
			b.sio.ToUser(username, "updateDefaultDevice", exten)
		}
	}
	front, err := nethcti.New(cfg)
	if err != nil {
		return err
	}
	b.nethcti = front
	b.stores.runs = append(b.stores.runs, front.Run)
	mux.Handle(nethcti.PrefixAPI+"/", front)
	mux.Handle(nethcti.PrefixWebrest+"/", front)
	b.sio, err = sio.New(state, frontLogin{front, b.auth}, frontDirectory{front, b.auth.Users}, sio.Config{Log: b.log.With("component", "sio")})
	if err != nil {
		return err
	}
	for _, p := range sio.Paths {
		mux.Handle(p, b.sio)
	}
	return nil
}

// frontLogin checks the socket's logins with the REST front's
// credentials (a JWT of POST /api/login or a persistent one, a legacy
// token of user accessKeyId), and, for a token the front refuses, as a
// ctibridge token (sio.NativeLogin). A login session's revocation or
// expiry ends the socket; a persistent token has neither.
type frontLogin struct {
	front *nethcti.Front
	auth  *auth.Service
}

func (l frontLogin) CheckLogin(accessKeyID, token string) (sio.Login, error) {
	id, err := l.front.CheckToken(accessKeyID, token)
	if err != nil {
		// The front's error (a JWT refused, the persistent tokens still
		// being read) is the one said unless the token is a native one.
		if login, nerr := (sio.NativeLogin{Service: l.auth}).CheckLogin(accessKeyID, token); nerr == nil {
			return login, nil
		}
		return sio.Login{}, err
	}
	login := sio.Login{User: id.User, Session: id.Session}
	if id.Session != "" {
		if _, login.Expires, err = l.auth.Authenticate(id.Session); err != nil {
			return sio.Login{}, err
		}
	}
	return login, nil
}

func (l frontLogin) OnRevoke(session string, f func()) (stop func()) {
	return l.auth.OnRevoke(session, f)
}

// frontDirectory names an extension's user as the front's reads do
// (nethcti.Front.Username), so the socket's "username" is theirs.
type frontDirectory struct {
	front *nethcti.Front
	users func() *auth.Users
}

func (d frontDirectory) UserOf(exten string) (*auth.User, bool) {
	name := d.front.Username(exten)
	if name == "" {
		return nil, false
	}
	return d.users().Lookup(name)
}
