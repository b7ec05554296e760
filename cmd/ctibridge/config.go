package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/ctibridge/ctibridge/rest"
)

// setting is one configuration knob: a flag, a CTIBRIDGE_* environment
// variable and a key in the YAML config file, all with the same name. The
// precedence is flag > environment > file > default.
type setting struct {
	name  string // flag name; the env var is CTIBRIDGE_ + upper(name with - as _); the file key is name
	def   string
	usage string
	set   func(string) error
	src   string // where the value came from: "FILE:LINE", "CTIBRIDGE_X", "--x"; "" for the default
	// repeat: the flag may be given several times, its values joined by
	// commas (--pbx); such a setting has no default.
	repeat bool
}

// settings collects the settings of one command.
type settings struct {
	list []*setting
	file string // the config file parse read, if any
	// sections are the file's keys that hold a mapping, not a setting
	// (pbxs: per-PBX credentials), each with its reader.
	sections map[string]func(*yaml.Node) error
}

func (s *settings) str(p *string, name, def, usage string) {
	*p = def
	s.list = append(s.list, &setting{name: name, def: def, usage: usage, set: func(v string) error { *p = v; return nil }})
}

func (s *settings) dur(p *time.Duration, name string, def time.Duration, usage string) {
	*p = def
	s.list = append(s.list, &setting{name: name, def: def.String(), usage: usage, set: func(v string) error {
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("not a duration (like 30s, 5m): %q", v)
		}
		*p = d
		return nil
	}})
}

func (s *settings) boolean(p *bool, name string, def bool, usage string) {
	*p = def
	s.list = append(s.list, &setting{name: name, def: strconv.FormatBool(def), usage: usage, set: func(v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("not a boolean (true or false): %q", v)
		}
		*p = b
		return nil
	}})
}

func (s *settings) integer(p *int64, name string, def int64, usage string) {
	*p = def
	s.list = append(s.list, &setting{name: name, def: strconv.FormatInt(def, 10), usage: usage, set: func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("not an integer: %q", v)
		}
		*p = n
		return nil
	}})
}

// prefixes is a comma-separated list of addresses or CIDR prefixes, checked
// when parsed (for --trusted-proxies).
func (s *settings) prefixes(p *[]netip.Prefix, name, def, usage string) {
	*p, _ = rest.ParseTrustedProxies(def)
	s.list = append(s.list, &setting{name: name, def: def, usage: usage, set: func(v string) error {
		ps, err := rest.ParseTrustedProxies(v)
		if err != nil {
			return err
		}
		*p = ps
		return nil
	}})
}

func envName(name string) string {
	return "CTIBRIDGE_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// parse applies defaults, then the config file (named by --config, or by
// CTIBRIDGE_CONFIG), then the environment, then the flags given in args.
// Unknown file keys, unknown flags and bad values are errors naming where
// they came from; parse returns the first, parseAll every one.
func (s *settings) parse(cmd string, args []string, getenv func(string) string, stderr io.Writer) error {
	if errs := s.parseAll(cmd, args, getenv, stderr); len(errs) > 0 {
		return errs[0]
	}
	return nil
}

// parseAll is parse reporting every bad setting instead of the first: an
// unparsable command line or an unreadable or malformed file stops it, a
// bad key or value does not. Errors about one setting are *settingError.
func (s *settings) parseAll(cmd string, args []string, getenv func(string) string, stderr io.Writer) []error {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var configFile string
	fs.StringVar(&configFile, "config", getenv("CTIBRIDGE_CONFIG"), "YAML config file (env CTIBRIDGE_CONFIG)")
	given := map[string]*string{}
	for _, st := range s.list {
		v := new(string)
		given[st.name] = v
		usage := fmt.Sprintf("%s (env %s)", st.usage, envName(st.name))
		if st.repeat {
			*v = st.def
			fs.Func(st.name, usage+"; repeatable", func(x string) error {
				if *v != "" { // a repeat setting has no default
					x = *v + "," + x
				}
				*v = x
				return nil
			})
			continue
		}
		fs.StringVar(v, st.name, st.def, usage)
	}
	if err := fs.Parse(args); err != nil {
		return []error{err}
	}
	if fs.NArg() > 0 {
		return []error{fmt.Errorf("%s: unexpected argument %q", cmd, fs.Arg(0))}
	}
	byName := map[string]*setting{}
	for _, st := range s.list {
		byName[st.name] = st
	}
	var errs []error
	if configFile != "" {
		s.file = configFile
		errs = s.loadFile(configFile, byName)
	}
	for _, st := range s.list {
		if v, ok := lookupEnv(getenv, envName(st.name)); ok {
			if err := st.set(v); err != nil {
				errs = append(errs, &settingError{text: fmt.Sprintf("%s: %v", envName(st.name), err), err: err, key: st.name, env: envName(st.name)})
			}
			st.src = envName(st.name)
		}
	}
	fs.Visit(func(f *flag.Flag) {
		if st := byName[f.Name]; st != nil {
			if err := st.set(*given[f.Name]); err != nil {
				errs = append(errs, &settingError{text: fmt.Sprintf("--%s: %v", f.Name, err), err: err, key: st.name, flag: true})
			}
			st.src = "--" + f.Name
		}
	})
	return errs
}

// settingError is one bad setting: its text names where it was given (file
// and line, environment variable or flag) and the key.
type settingError struct {
	text    string
	err     error  // the value's problem, when there is one
	key     string // the key as written
	file    string // the config file, when it came from there
	line    int
	env     string // the environment variable, when it came from there
	flag    bool   // it came from the command line
	unknown bool   // the key is not a setting
}

func (e *settingError) Error() string { return e.text }
func (e *settingError) Unwrap() error { return e.err }

func lookupEnv(getenv func(string) string, k string) (string, bool) {
	v := getenv(k)
	return v, v != ""
}

// loadFile applies the config file at path. It returns every bad key; an
// unreadable or malformed file is one error.
func (s *settings) loadFile(path string, byName map[string]*setting) []error {
	data, err := os.ReadFile(path)
	if err != nil {
		return []error{fmt.Errorf("config: %w", err)}
	}
	var raw map[string]yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&raw); err != nil && err != io.EOF {
		return []error{fmt.Errorf("config %s: %w", path, err)}
	}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	// In file order, so that problems read top to bottom.
	sort.Slice(keys, func(i, j int) bool {
		if li, lj := raw[keys[i]].Line, raw[keys[j]].Line; li != lj {
			return li < lj
		}
		return keys[i] < keys[j]
	})
	var errs []error
	for _, k := range keys {
		node := raw[k]
		bad := func(unknown bool, err error, format string, args ...any) {
			errs = append(errs, &settingError{text: fmt.Sprintf("config %s:%d: ", path, node.Line) + fmt.Sprintf(format, args...),
				err: err, key: k, file: path, line: node.Line, unknown: unknown})
		}
		if read := s.sections[k]; read != nil {
			if err := read(&node); err != nil {
				bad(false, err, "key %q: %v", k, err)
			}
			continue
		}
		st := byName[strings.ReplaceAll(k, "_", "-")]
		if st == nil {
			bad(true, nil, "unknown key %q", k)
			continue
		}
		if node.Kind != yaml.ScalarNode {
			bad(false, nil, "key %q: want a single value", k)
			continue
		}
		if err := st.set(node.Value); err != nil {
			bad(false, err, "key %q: %v", k, err)
		}
		st.src = fmt.Sprintf("%s:%d", path, node.Line)
	}
	return errs
}

// source says where the setting name got its value: "FILE:LINE" for the
// config file, "CTIBRIDGE_X" for the environment, "--x" for a flag, "" when
// it has its default.
func (s *settings) source(name string) string {
	for _, st := range s.list {
		if st.name == name {
			return st.src
		}
	}
	return ""
}

// markdownTable renders the settings as the README's configuration table.
func (s *settings) markdownTable() string {
	var b strings.Builder
	b.WriteString("| flag | environment | meaning | default |\n|---|---|---|---|\n")
	for _, st := range s.list {
		def := st.def
		if def == "" {
			def = "none"
		}
		fmt.Fprintf(&b, "| `--%s` | `%s` | %s | `%s` |\n", st.name, envName(st.name), st.usage, def)
	}
	return b.String()
}
