package main

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

// setting is one configuration knob: a flag, a CTIBRIDGE_* environment
// variable and a key in the YAML config file, all with the same name. The
// precedence is flag > environment > file > default.
type setting struct {
	name  string // flag name; the env var is CTIBRIDGE_ + upper(name with - as _); the file key is name
	def   string
	usage string
	set   func(string) error
}

// settings collects the settings of one command.
type settings struct {
	list []*setting
}

func (s *settings) str(p *string, name, def, usage string) {
	*p = def
	s.list = append(s.list, &setting{name, def, usage, func(v string) error { *p = v; return nil }})
}

func (s *settings) dur(p *time.Duration, name string, def time.Duration, usage string) {
	*p = def
	s.list = append(s.list, &setting{name, def.String(), usage, func(v string) error {
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
	s.list = append(s.list, &setting{name, strconv.FormatBool(def), usage, func(v string) error {
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
	s.list = append(s.list, &setting{name, strconv.FormatInt(def, 10), usage, func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("not an integer: %q", v)
		}
		*p = n
		return nil
	}})
}

func envName(name string) string {
	return "CTIBRIDGE_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// parse applies defaults, then the config file (named by --config, or by
// CTIBRIDGE_CONFIG), then the environment, then the flags given in args.
// Unknown file keys, unknown flags and bad values are errors naming where
// they came from.
func (s *settings) parse(cmd string, args []string, getenv func(string) string, stderr io.Writer) error {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var configFile string
	fs.StringVar(&configFile, "config", getenv("CTIBRIDGE_CONFIG"), "YAML config file (env CTIBRIDGE_CONFIG)")
	given := map[string]*string{}
	for _, st := range s.list {
		v := new(string)
		given[st.name] = v
		fs.StringVar(v, st.name, st.def, fmt.Sprintf("%s (env %s)", st.usage, envName(st.name)))
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%s: unexpected argument %q", cmd, fs.Arg(0))
	}
	byName := map[string]*setting{}
	for _, st := range s.list {
		byName[st.name] = st
	}
	if configFile != "" {
		if err := s.loadFile(configFile, byName); err != nil {
			return err
		}
	}
	for _, st := range s.list {
		if v, ok := lookupEnv(getenv, envName(st.name)); ok {
			if err := st.set(v); err != nil {
				return fmt.Errorf("%s: %w", envName(st.name), err)
			}
		}
	}
	var ferr error
	fs.Visit(func(f *flag.Flag) {
		if st := byName[f.Name]; st != nil && ferr == nil {
			if err := st.set(*given[f.Name]); err != nil {
				ferr = fmt.Errorf("--%s: %w", f.Name, err)
			}
		}
	})
	return ferr
}

func lookupEnv(getenv func(string) string, k string) (string, bool) {
	v := getenv(k)
	return v, v != ""
}

func (s *settings) loadFile(path string, byName map[string]*setting) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	var raw map[string]yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&raw); err != nil && err != io.EOF {
		return fmt.Errorf("config %s: %w", path, err)
	}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		node := raw[k]
		st := byName[strings.ReplaceAll(k, "_", "-")]
		if st == nil {
			return fmt.Errorf("config %s:%d: unknown key %q", path, node.Line, k)
		}
		if node.Kind != yaml.ScalarNode {
			return fmt.Errorf("config %s:%d: key %q: want a single value", path, node.Line, k)
		}
		if err := st.set(node.Value); err != nil {
			return fmt.Errorf("config %s:%d: key %q: %w", path, node.Line, k, err)
		}
	}
	return nil
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
