package config

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Setting is one configuration knob: a flag, a CTIBRIDGE_* environment
// variable and a key in the YAML config file, all with the same name. The
// precedence is flag > environment > file > default.
type Setting struct {
	Name  string // flag name; the env var is CTIBRIDGE_ + upper(name with - as _); the file key is name
	Def   string
	Usage string
	Set   func(string) error
	Src   string // where the value came from: "FILE:LINE", "CTIBRIDGE_X", "--x"; "" for the default
	// Repeat: the flag may be given several times, its values joined by
	// commas (--pbx); such a setting has no default.
	Repeat bool
}

// Settings collects the settings of one command: Str, Dur, Bool, Int
// and Func add one each, Parse reads them all.
type Settings struct {
	List []*Setting
	File string // the config file Parse read, if any
	// Sections are the file's keys that hold a mapping, not a setting
	// (pbxs: per-PBX credentials), each with its reader.
	Sections map[string]func(*yaml.Node) error
}

func (s *Settings) Str(p *string, name, def, usage string) {
	*p = def
	s.List = append(s.List, &Setting{Name: name, Def: def, Usage: usage, Set: func(v string) error { *p = v; return nil }})
}

func (s *Settings) Dur(p *time.Duration, name string, def time.Duration, usage string) {
	*p = def
	s.List = append(s.List, &Setting{Name: name, Def: def.String(), Usage: usage, Set: func(v string) error {
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("not a duration (like 30s, 5m): %q", v)
		}
		*p = d
		return nil
	}})
}

func (s *Settings) Bool(p *bool, name string, def bool, usage string) {
	*p = def
	s.List = append(s.List, &Setting{Name: name, Def: strconv.FormatBool(def), Usage: usage, Set: func(v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("not a boolean (true or false): %q", v)
		}
		*p = b
		return nil
	}})
}

func (s *Settings) Int(p *int64, name string, def int64, usage string) {
	*p = def
	s.List = append(s.List, &Setting{Name: name, Def: strconv.FormatInt(def, 10), Usage: usage, Set: func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("not an integer: %q", v)
		}
		*p = n
		return nil
	}})
}

// Func adds a setting whose value set checks and stores.
func (s *Settings) Func(name, def, usage string, set func(string) error) {
	s.List = append(s.List, &Setting{Name: name, Def: def, Usage: usage, Set: set})
}

// EnvName is the environment variable of the setting name.
func EnvName(name string) string {
	return "CTIBRIDGE_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// Parse applies defaults, then the config file (named by --config, or by
// CTIBRIDGE_CONFIG), then the environment, then the flags given in args.
// Unknown file keys, unknown flags and bad values are errors naming where
// they came from; Parse returns the first, ParseAll every one.
func (s *Settings) Parse(cmd string, args []string, getenv func(string) string, stderr io.Writer) error {
	if errs := s.ParseAll(cmd, args, getenv, stderr); len(errs) > 0 {
		return errs[0]
	}
	return nil
}

// ParseAll is Parse reporting every bad setting instead of the first: an
// unparsable command line or an unreadable or malformed file stops it, a
// bad key or value does not. Errors about one setting are *Error.
func (s *Settings) ParseAll(cmd string, args []string, getenv func(string) string, stderr io.Writer) []error {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var configFile string
	fs.StringVar(&configFile, "config", getenv("CTIBRIDGE_CONFIG"), "YAML config file (env CTIBRIDGE_CONFIG)")
	given := map[string]*string{}
	for _, st := range s.List {
		v := new(string)
		given[st.Name] = v
		usage := fmt.Sprintf("%s (env %s)", st.Usage, EnvName(st.Name))
		if st.Repeat {
			*v = st.Def
			fs.Func(st.Name, usage+"; repeatable", func(x string) error {
				if *v != "" { // a repeat Setting has no default
					x = *v + "," + x
				}
				*v = x
				return nil
			})
			continue
		}
		fs.StringVar(v, st.Name, st.Def, usage)
	}
	if err := fs.Parse(args); err != nil {
		return []error{err}
	}
	if fs.NArg() > 0 {
		return []error{fmt.Errorf("%s: unexpected argument %q", cmd, fs.Arg(0))}
	}
	byName := map[string]*Setting{}
	for _, st := range s.List {
		byName[st.Name] = st
	}
	var errs []error
	if configFile != "" {
		s.File = configFile
		errs = s.loadFile(configFile, byName)
	}
	for _, st := range s.List {
		if v, ok := lookupEnv(getenv, EnvName(st.Name)); ok {
			if err := st.Set(v); err != nil {
				errs = append(errs, &Error{Text: fmt.Sprintf("%s: %v", EnvName(st.Name), err), Err: err, Key: st.Name, Env: EnvName(st.Name)})
			}
			st.Src = EnvName(st.Name)
		}
	}
	fs.Visit(func(f *flag.Flag) {
		if st := byName[f.Name]; st != nil {
			if err := st.Set(*given[f.Name]); err != nil {
				errs = append(errs, &Error{Text: fmt.Sprintf("--%s: %v", f.Name, err), Err: err, Key: st.Name, Flag: true})
			}
			st.Src = "--" + f.Name
		}
	})
	return errs
}

// Error is one bad setting: its text names where it was given (file
// and line, environment variable or flag) and the key.
type Error struct {
	Text    string
	Err     error  // the value's problem, when there is one
	Key     string // the key as written
	File    string // the config file, when it came from there
	Line    int
	Env     string // the environment variable, when it came from there
	Flag    bool   // it came from the command line
	Unknown bool   // the key is not a setting
}

func (e *Error) Error() string { return e.Text }
func (e *Error) Unwrap() error { return e.Err }

func lookupEnv(getenv func(string) string, k string) (string, bool) {
	v := getenv(k)
	return v, v != ""
}

// loadFile applies the config file at path. It returns every bad key; an
// unreadable or malformed file is one error.
func (s *Settings) loadFile(path string, byName map[string]*Setting) []error {
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
			errs = append(errs, &Error{Text: fmt.Sprintf("config %s:%d: ", path, node.Line) + fmt.Sprintf(format, args...),
				Err: err, Key: k, File: path, Line: node.Line, Unknown: unknown})
		}
		if read := s.Sections[k]; read != nil {
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
		if err := st.Set(node.Value); err != nil {
			bad(false, err, "key %q: %v", k, err)
		}
		st.Src = fmt.Sprintf("%s:%d", path, node.Line)
	}
	return errs
}

// Source says where the setting name got its value: "FILE:LINE" for the
// config file, "CTIBRIDGE_X" for the environment, "--x" for a flag, "" when
// it has its default.
func (s *Settings) Source(name string) string {
	for _, st := range s.List {
		if st.Name == name {
			return st.Src
		}
	}
	return ""
}

// MarkdownTable renders the settings as the README's configuration table.
func (s *Settings) MarkdownTable() string {
	var b strings.Builder
	b.WriteString("| flag | environment | meaning | default |\n|---|---|---|---|\n")
	for _, st := range s.List {
		def := st.Def
		if def == "" {
			def = "none"
		}
		fmt.Fprintf(&b, "| `--%s` | `%s` | %s | `%s` |\n", st.Name, EnvName(st.Name), st.Usage, def)
	}
	return b.String()
}
