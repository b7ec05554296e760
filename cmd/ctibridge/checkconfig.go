package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/config"
	"github.com/ctibridge/ctibridge/nethcti"
	"github.com/ctibridge/ctibridge/rest"
	"github.com/ctibridge/ctibridge/webhook"
)

// problem is one thing wrong with serve's configuration, located as
// precisely as we know: the file and line (or the environment variable or
// flag) the value came from, and the key.
type problem struct {
	where string // "FILE:LINE", "FILE", "CTIBRIDGE_X", "--x" or "" (a default)
	key   string // `key "ami-user"`, or `user "alice": key "role"`
	msg   string
	hint  string // what to do about it; may be ""
	warn  bool   // worth fixing, but serve starts anyway
}

// Error is the problem on one line, for serve's error and the journal.
func (p problem) Error() string {
	var b strings.Builder
	if p.where != "" {
		b.WriteString(p.where)
		b.WriteString(": ")
	}
	if p.key != "" {
		b.WriteString(p.key)
		b.WriteString(": ")
	}
	b.WriteString(p.msg)
	if p.hint != "" {
		b.WriteString(" (hint: ")
		b.WriteString(p.hint)
		b.WriteString(")")
	}
	return b.String()
}

// firstError is the first problem that is not a warning, or nil.
func firstError(probs []problem) error {
	for _, p := range probs {
		if !p.warn {
			return p
		}
	}
	return nil
}

// runCheckConfig is `ctibridge check-config`: it takes serve's flags,
// environment and config file, and reports every problem in them and in the
// files they name (users file, TLS certificate and key), one per line with
// where it is, the key and a hint. It returns an error when any problem is
// not a warning.
func runCheckConfig(args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var c serveConfig
	st := serveSettings(&c)
	var probs []problem
	parseErrs := st.ParseAll("check-config", args, getenv, stderr)
	for _, err := range parseErrs {
		probs = append(probs, parseProblem(st, err))
	}
	if len(parseErrs) == 1 && !isSettingError(parseErrs[0]) {
		// The command line or the file itself is unusable: nothing else
		// can be checked meaningfully.
		return report(stdout, probs, "", nil)
	}
	users, more := checkServe(&c, st)
	probs = append(probs, more...)
	return report(stdout, probs, st.File, users)
}

func isSettingError(err error) bool {
	var se *config.Error
	return errors.As(err, &se)
}

// report prints the problems, then a summary; it returns an error when
// there was any error.
func report(w io.Writer, probs []problem, config string, users *auth.Users) error {
	errs, warns := 0, 0
	for _, p := range probs {
		kind := "error"
		if p.warn {
			kind = "warning"
			warns++
		} else {
			errs++
		}
		fmt.Fprintf(w, "%s: %s\n", kind, p.Error())
	}
	if errs > 0 {
		return fmt.Errorf("check-config: %d error(s), %d warning(s)", errs, warns)
	}
	what := "flags and environment"
	if config != "" {
		what = config
	}
	fmt.Fprintf(w, "ok: %s (%d users)", what, users.Len())
	if warns > 0 {
		fmt.Fprintf(w, ", %d warning(s)", warns)
	}
	fmt.Fprintln(w)
	return nil
}

// locate names where the setting name got its value and how to call it
// there: a file line and its key, or the environment variable, or the flag;
// for a default, the config file (where it would go) or the flag.
func locate(st *settings, name string) (where, key string) {
	switch src := st.Source(name); {
	case strings.HasPrefix(src, "CTIBRIDGE_"), strings.HasPrefix(src, "--"):
		return src, ""
	case src != "":
		return src, fmt.Sprintf("key %q", name)
	case st.File != "":
		return st.File, fmt.Sprintf("key %q", name)
	}
	return "", "--" + name
}

// parseProblem turns one parse error into a problem with a hint.
func parseProblem(st *settings, err error) problem {
	var se *config.Error
	if !errors.As(err, &se) {
		return problem{msg: err.Error(), hint: "see `ctibridge serve --help`"}
	}
	p := problem{key: fmt.Sprintf("key %q", se.Key)}
	switch {
	case se.File != "":
		p.where = fmt.Sprintf("%s:%d", se.File, se.Line)
	case se.Env != "":
		p.where, p.key = se.Env, ""
	case se.Flag:
		p.where, p.key = "--"+se.Key, ""
	}
	if se.Unknown {
		p.msg = "unknown key"
		if near := nearestSetting(st, se.Key); near != "" {
			p.hint = fmt.Sprintf("did you mean %q?", near)
		} else {
			p.hint = "the keys are serve's flag names without the dashes: see `ctibridge serve --help`"
		}
		return p
	}
	if se.Err != nil {
		p.msg = se.Err.Error()
	} else {
		p.msg = strings.TrimPrefix(se.Text, fmt.Sprintf("config %s:%d: key %q: ", se.File, se.Line, se.Key))
	}
	for _, s := range st.List {
		if s.Name == strings.ReplaceAll(se.Key, "_", "-") {
			def := s.Def
			if def == "" {
				def = "none"
			}
			p.hint = fmt.Sprintf("%s; default %s", s.Usage, def)
		}
	}
	return p
}

// nearestSetting is the setting name closest to key (a typo), or "".
func nearestSetting(st *settings, key string) string {
	best, bestD := "", 4 // more than 3 edits away is not a typo
	for _, s := range st.List {
		if d := editDistance(strings.ReplaceAll(strings.ToLower(key), "_", "-"), s.Name); d < bestD {
			best, bestD = s.Name, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// checkServe checks what parsing cannot: required settings, addresses,
// the log settings, the dial pattern, the database URL, and the files the
// settings name (users file, TLS certificate and key, directories). serve
// calls it before starting anything, so that the service never starts
// half-configured; check-config prints all it returns. users is the loaded
// users file (an empty set when none is configured or it has errors).
// checkTemplates checks the dialplan names and the templates the REST
// API fills in: context, channel technology, queue interface, voicemail
// extension, the pop-up's link.
func checkTemplates(c *serveConfig, add func(name string, warn bool, hint, format string, args ...any)) {
	for _, v := range []struct{ name, val string }{{"context", c.context}, {"chan-tech", c.chanTech}, {"queue-interface", c.queueIface}} {
		if strings.ContainsAny(v.val, "\r\n\x00") {
			add(v.name, false, "", "contains CR, LF or NUL")
		}
	}
	if err := rest.CheckVoicemailExten(c.voicemailExten); err != nil {
		add("voicemail-exten", false, "vmu{exten} (FreePBX) or *{exten}", "%v", err)
	}
	if c.popupLink != "" {
		if err := rest.CheckPopupLink(c.popupLink); err != nil {
			add("popup-link", false, "https://crm.example.com/card?phone={number}&name={name}", "%v", err)
		}
	}
	if _, err := rest.ParseAutoAnswerRules(c.autoAnswer); err != nil {
		add("auto-answer", false, "default, off or yealink:call-info,polycom:alert-info", "%v", err)
	}
}

func checkServe(c *serveConfig, st *settings) (users *auth.Users, probs []problem) {
	add := func(name string, warn bool, hint, format string, args ...any) {
		where, key := locate(st, name)
		probs = append(probs, problem{where: where, key: key, msg: fmt.Sprintf(format, args...), hint: hint, warn: warn})
	}
	checkBus(c.bus, add)
	if c.amiUser == "" && !c.bus.edge {
		add("ami-user", false, "the [section] name of the manager user in /etc/asterisk/manager.conf (docs/operations.md)", "required")
	}
	if c.amiSecret == "" && !c.bus.edge {
		add("ami-secret", false, "its secret in manager.conf; set ami-secret in the config file or CTIBRIDGE_AMI_SECRET", "required")
	} else if st.File != "" && strings.HasPrefix(st.Source("ami-secret"), st.File+":") && worldReadable(st.File) {
		add("ami-secret", true, "chmod 0640 "+st.File+"; chgrp ctibridge "+st.File, "in a file readable by everyone")
	}
	for _, a := range []struct{ name, val string }{{"ami", c.ami}, {"http", c.http}, {"admin", c.admin}} {
		if err := checkHostPort(a.val); err != nil {
			add(a.name, false, "host:port, like 127.0.0.1:8080 or [::1]:8080", "%v", err)
		}
	}
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(c.logLevel)); err != nil {
		add("log-level", false, "debug, info, warn or error", "unknown level %q", c.logLevel)
	}
	if c.logFormat != "text" && c.logFormat != "json" {
		add("log-format", false, "text or json", "unknown format %q", c.logFormat)
	}
	if _, err := regexp.Compile(c.dialPattern); err != nil {
		add("dial-pattern", false, "a Go regular expression (RE2), like "+strconv.Quote(`^[0-9*#+]{1,32}$`), "%v", err)
	}
	if _, err := rest.CheckOrigin(splitList(c.wsOrigins)); err != nil {
		add("ws-origins", false, "https://host[:port], comma-separated, or *", "%v", err)
	}
	checkTemplates(c, add)
	if _, err := parseEndpointTypes(c.nethcti.endpointTypes); err != nil {
		add("nethcti-endpoint-types", false, "prefix=type,... like 92=webrtc,93=nethlink", "%v", err)
	}
	if _, err := parseFeatureCodes(c.nethcti.featureCodes); err != nil {
		add("nethcti-feature-codes", false, "name=code,... like audio_test=*41", "%v", err)
	}
	if c.nethcti.phones != nil {
		if err := nethcti.CheckPhones(c.nethcti.phones); err != nil {
			add("nethcti-phones", false, "a list of {vendor, match, answer, hold, mute} with http(s)://{ip}/... URLs", "%v", err)
		}
	}
	if c.phoneCountry != "" && strings.Trim(c.phoneCountry, "0123456789") != "" {
		add("phone-country", false, "digits only, like 39", "%q is not a country calling code", c.phoneCountry)
	}
	for _, d := range []struct {
		name string
		val  time.Duration
	}{{"token-ttl", c.tokenTTL}, {"action-timeout", c.actionTimeout}, {"ws-replay-age", c.wsReplayAge},
		{"ws-slow-timeout", c.wsSlowTimeout}, {"ws-auth-timeout", c.wsAuthTimeout}, {"reconcile-every", c.reconcile}, {"ami-ping", c.amiPing}} {
		if d.val < 0 {
			add(d.name, false, "a positive duration like 30s", "negative")
		}
	}
	if c.wsReplay < 0 {
		add("ws-replay", false, "a count of changes, like 10000", "negative")
	}
	if c.recordMax <= 0 {
		add("record-max-bytes", false, "a size in bytes, like 104857600", "must be positive")
	}
	switch {
	case c.db == "", strings.HasPrefix(c.db, "sqlite:"):
	case strings.HasPrefix(c.db, "postgres://"), strings.HasPrefix(c.db, "postgresql://"):
		if _, err := pgxpool.ParseConfig(c.db); err != nil {
			add("db", false, "postgres://user:password@host:5432/dbname", "not a PostgreSQL URL")
		}
	default:
		add("db", false, "postgres://user:password@host/dbname or sqlite:/var/lib/ctibridge/ctibridge.db", "unknown database %q", redactDSN(c.db))
	}
	for _, d := range []struct{ name, val string }{{"data-dir", c.dataDir}, {"record-ami", c.recordAMI}} {
		if d.val == "" {
			continue
		}
		if fi, err := os.Stat(d.val); err == nil && !fi.IsDir() {
			add(d.name, false, "a directory", "%s is not a directory", d.val)
		}
	}
	if _, err := parseQueueNumbers(c.queueNumbers); err != nil {
		add("queue-numbers", false, "name=number,..., like support=600", "%v", err)
	}
	probs = append(probs, checkTLS(c, st)...)
	if c.webhooks != "" {
		if _, err := webhook.LoadFile(c.webhooks); err != nil {
			add("webhooks", false, "see docs/webhooks.md", "%v", err)
		}
	}
	users, more := checkUsersAndDirs(c, add)
	probs = append(probs, more...)
	if specs, err := parsePBXs(c); err != nil {
		add("pbx", false, "NAME=host:port, repeatable; NAME in a-z 0-9 - _ (docs/operations.md \"Several PBXs\")", "%v", err)
	} else if checkBusPBXs(c.bus, specs, add); users != nil {
		checkUserPBXs(specs, users, func(u, key, pbx string) {
			probs = append(probs, problem{where: c.users, key: fmt.Sprintf("user %q: key %q", u, key),
				msg: fmt.Sprintf("PBX %q is not given by --pbx", pbx), hint: "add --pbx " + pbx + "=host:port, or fix the user"})
		})
	}
	return users, probs
}

// checkUsersAndDirs checks the directories and the users file; a problem
// of the directories' profiles is reported through add.
func checkUsersAndDirs(c *serveConfig, add func(name string, warn bool, hint, format string, args ...any)) (users *auth.Users, probs []problem) {
	srcs, closeDirs, err := c.dir.sources()
	closeDirs()
	if err != nil {
		name, _, _ := strings.Cut(strings.TrimPrefix(err.Error(), "--"), ":")
		add(name, false, "docs/operations.md, Directories", "%v", err)
	}

	users, _ = auth.NewUsers(nil)
	if len(srcs) > 0 {
		defer func() {
			if err := c.dir.checkProfiles(users); err != nil {
				add("ldap-group-profiles", false, "a profile of the users file's profiles: or user, operator, admin", "%v", err)
			}
		}()
	}
	if c.users == "" && len(srcs) > 0 {
		return users, probs
	}
	if c.users == "" {
		add("users", true, "write users with `ctibridge passwd` hashes (docs/operations.md)", "no users file: nobody can log in")
		return users, probs
	}
	data, err := os.ReadFile(c.users)
	if err != nil {
		add("users", false, fileHint(err), "cannot read the users file: %v", err)
		return users, probs
	}
	us, errs := auth.CheckUsers(c.users, data)
	for _, err := range errs {
		probs = append(probs, usersProblem(c.users, err))
	}
	if len(errs) > 0 {
		return users, probs
	}
	users = us
	if us.Len() == 0 && len(srcs) == 0 {
		probs = append(probs, problem{where: c.users, key: `key "users"`, msg: "no users: nobody can log in",
			hint: "add users with hashes from `ctibridge passwd`", warn: true})
	}
	if worldReadable(c.users) {
		probs = append(probs, problem{where: c.users, msg: "readable by everyone, and it holds password hashes",
			hint: "chmod 0640 " + c.users + "; chgrp ctibridge " + c.users, warn: true})
	}
	return us, probs
}

// checkTLS checks the HTTPS certificate and key: given together, readable,
// a matching pair, and not expired.
func checkTLS(c *serveConfig, st *settings) []problem {
	if c.tlsCert == "" && c.tlsKey == "" {
		return nil
	}
	var probs []problem
	add := func(name string, warn bool, hint, format string, args ...any) {
		where, key := locate(st, name)
		probs = append(probs, problem{where: where, key: key, msg: fmt.Sprintf(format, args...), hint: hint, warn: warn})
	}
	if c.tlsCert == "" || c.tlsKey == "" {
		missing := "tls-cert"
		if c.tlsKey == "" {
			missing = "tls-key"
		}
		add(missing, false, "tls-cert and tls-key go together: give both or neither", "missing")
		return probs
	}
	ok := true
	for _, f := range []struct{ name, path string }{{"tls-cert", c.tlsCert}, {"tls-key", c.tlsKey}} {
		if _, err := os.ReadFile(f.path); err != nil {
			add(f.name, false, fileHint(err), "cannot read: %v", err)
			ok = false
		}
	}
	if !ok {
		return probs
	}
	pair, err := tls.LoadX509KeyPair(c.tlsCert, c.tlsKey)
	if err != nil {
		add("tls-cert", false, "PEM certificate (chain) in tls-cert, its PEM private key in tls-key", "%v", err)
		return probs
	}
	if worldReadable(c.tlsKey) {
		add("tls-key", true, "chmod 0640 "+c.tlsKey+"; chgrp ctibridge "+c.tlsKey, "private key readable by everyone")
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		add("tls-cert", false, "", "%v", err)
		return probs
	}
	switch left := time.Until(leaf.NotAfter); {
	case left <= 0:
		add("tls-cert", false, "renew it, then `systemctl reload ctibridge`", "certificate expired on %s", leaf.NotAfter.Format(time.DateOnly))
	case left < 14*24*time.Hour:
		add("tls-cert", true, "renew it, then `systemctl reload ctibridge`", "certificate expires on %s", leaf.NotAfter.Format(time.DateOnly))
	}
	return probs
}

func usersProblem(file string, err error) problem {
	var ue *auth.UsersError
	if !errors.As(err, &ue) {
		return problem{where: file, msg: err.Error()}
	}
	p := problem{where: ue.File, msg: ue.Msg}
	if ue.Line > 0 {
		p.where = fmt.Sprintf("%s:%d", ue.File, ue.Line)
	}
	switch {
	case ue.User != "" && ue.Key != "":
		p.key = fmt.Sprintf("user %q: key %q", ue.User, ue.Key)
	case ue.User != "":
		p.key = fmt.Sprintf("user %q", ue.User)
	case ue.Key != "":
		p.key = fmt.Sprintf("key %q", ue.Key)
	}
	switch ue.Key {
	case "password_hash":
		p.hint = "make one with `echo 'the password' | ctibridge passwd`"
	case "role":
		p.hint = "user, operator or admin"
	case "endpoints":
		p.hint = "the extension numbers the user owns, like [\"201\"]"
	}
	if p.hint == "" && strings.Contains(ue.Msg, "unknown key") {
		p.hint = "a user has username, name, password_hash, role, endpoints, groups, permissions"
	}
	return p
}

func fileHint(err error) string {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "check the path"
	case errors.Is(err, fs.ErrPermission):
		return "the service runs as user ctibridge: chgrp ctibridge FILE; chmod 0640 FILE"
	}
	return ""
}

func worldReadable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().Perm()&0o004 != 0
}

func checkHostPort(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q: %w", addr, err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("%q: bad port %q", addr, port)
	}
	return nil
}

// redactDSN hides what could be a password in a database URL.
func redactDSN(dsn string) string {
	if i := strings.Index(dsn, "@"); i >= 0 {
		return "..." + dsn[i:]
	}
	return dsn
}
