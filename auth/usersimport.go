package auth

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ImportCSV adds the users of the CSV r (named name in errors) to the
// users file path's data (empty: a new file) and returns the file's new
// data and how many users it added. The columns are csvColumns:
// username (required), name, password or password_hash, role or
// profile, endpoints, groups, permissions (lists separated by ;),
// cellphone. Every bad row is reported (file:line), each checked alone
// first, then the whole result as serve would load it; nothing is
// returned then.
func ImportCSV(name string, r io.Reader, path string, data []byte) (out []byte, n int, err error) {
	rows, err := csvUsers(name, r)
	if err != nil {
		return nil, 0, err
	}
	if out, err = appendUsers(path, data, rows); err != nil {
		return nil, 0, err
	}
	return out, len(rows), nil
}

// csvColumns are the CSV's known columns.
var csvColumns = []string{"username", "name", "password", "password_hash", "role", "profile", "endpoints", "groups", "permissions", "cellphone"}

// csvUsers reads the CSV into users-file entries; every bad row is
// reported (file:line), and nothing is returned then.
func csvUsers(name string, r io.Reader) ([]csvRow, error) {
	cr := csv.NewReader(r)
	cr.TrimLeadingSpace = true
	head, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("users import: %s: no header line (%v)", name, err)
	}
	col := map[string]int{}
	for i, h := range head {
		h = strings.ToLower(strings.TrimSpace(h))
		if !slices.Contains(csvColumns, h) {
			return nil, fmt.Errorf("users import: %s:1: unknown column %q (known: %s)", name, h, strings.Join(csvColumns, ", "))
		}
		col[h] = i
	}
	if _, ok := col["username"]; !ok {
		return nil, fmt.Errorf("users import: %s:1: no username column", name)
	}
	var rows []csvRow
	var errs []error
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		line, _ := cr.FieldPos(0)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: %v", name, line, err))
			continue
		}
		get := func(k string) string {
			if i, ok := col[k]; ok && i < len(rec) {
				return strings.TrimSpace(rec[i])
			}
			return ""
		}
		n, err := csvUser(get)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: user %q: %v", name, line, get("username"), err))
			continue
		}
		rows = append(rows, csvRow{where: fmt.Sprintf("%s:%d", name, line), name: get("username"), node: n})
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("users import: nothing written:\n%w", errors.Join(errs...))
	}
	return rows, nil
}

// csvRow is one CSV user as a users-file entry.
type csvRow struct {
	where, name string // file:line, user name
	node        *yaml.Node
}

// csvUser makes one users-file entry and checks it alone.
func csvUser(get func(string) string) (*yaml.Node, error) {
	hash := get("password_hash")
	switch pw := get("password"); {
	case pw != "" && hash != "":
		return nil, errors.New("give password or password_hash, not both")
	case pw != "":
		h, err := HashPassword(pw, 0)
		if err != nil {
			return nil, err
		}
		hash = h
	}
	n := &yaml.Node{Kind: yaml.MappingNode}
	add := func(k string, v *yaml.Node) {
		n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: k}, v)
	}
	str := func(v string) *yaml.Node {
		return &yaml.Node{Kind: yaml.ScalarNode, Value: v, Style: yaml.DoubleQuotedStyle}
	}
	for _, k := range []string{"username", "name"} {
		if v := get(k); v != "" || k == "username" {
			add(k, str(v))
		}
	}
	add("password_hash", str(hash))
	for _, k := range []string{"role", "profile", "cellphone"} {
		if v := get(k); v != "" {
			add(k, str(v))
		}
	}
	for _, k := range []string{"endpoints", "groups", "permissions"} {
		if v := get(k); v != "" {
			l := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
			for _, e := range strings.FieldsFunc(v, func(r rune) bool { return r == ';' || r == ' ' }) {
				l.Content = append(l.Content, str(e))
			}
			add(k, l)
		}
	}
	return n, nil
}

// appendUsers adds the rows to the users file's data (or a new file) and
// checks the result as serve would: each row alone first (errors name the
// CSV line), then the whole file.
func appendUsers(path string, data []byte, rows []csvRow) ([]byte, error) {
	var doc yaml.Node
	if len(bytes.TrimSpace(data)) == 0 {
		data = []byte("users:\n")
	}
	if err := yaml.Unmarshal(data, &doc); err != nil || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("users import: %s: not a users file (%v)", path, err)
	}
	top := doc.Content[0]
	var list, profiles *yaml.Node
	for i := 0; i+1 < len(top.Content); i += 2 {
		switch top.Content[i].Value {
		case "users":
			list = top.Content[i+1]
		case "profiles":
			profiles = top.Content[i+1]
		}
	}
	if list == nil {
		list = &yaml.Node{Kind: yaml.SequenceNode}
		top.Content = append(top.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: "users"}, list)
	}
	if list.Kind == yaml.ScalarNode && list.Tag == "!!null" {
		*list = yaml.Node{Kind: yaml.SequenceNode}
	}
	taken := map[string]bool{}
	for _, u := range list.Content {
		for i := 0; i+1 < len(u.Content); i += 2 {
			if u.Content[i].Value == "username" {
				taken[u.Content[i+1].Value] = true
			}
		}
	}
	var errs []error
	for _, r := range rows {
		if taken[r.name] {
			errs = append(errs, fmt.Errorf("%s: user %q: duplicate user (already in %s or earlier in the CSV)", r.where, r.name, path))
			continue
		}
		taken[r.name] = true
		if err := checkAlone(profiles, r.node); err != nil {
			errs = append(errs, fmt.Errorf("%s: user %q: %w", r.where, r.name, err))
		}
		list.Content = append(list.Content, r.node)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("users import: nothing written:\n%w", errors.Join(errs...))
	}
	out, err := encodeYAML(&doc)
	if err != nil {
		return nil, err
	}
	if _, errs := CheckUsers(path, out); len(errs) > 0 {
		return nil, fmt.Errorf("users import: nothing written; the result would not load:\n%w", errors.Join(errs...))
	}
	return out, nil
}

// checkAlone checks one entry as a users file holding only it (and the
// file's profiles).
func checkAlone(profiles, entry *yaml.Node) error {
	top := &yaml.Node{Kind: yaml.MappingNode}
	if profiles != nil {
		top.Content = append(top.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: "profiles"}, profiles)
	}
	top.Content = append(top.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: "users"},
		&yaml.Node{Kind: yaml.SequenceNode, Content: []*yaml.Node{entry}})
	b, err := encodeYAML(&yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{top}})
	if err != nil {
		return err
	}
	if _, errs := CheckUsers("row", b); len(errs) > 0 {
		var ue *UsersError
		if errors.As(errs[0], &ue) {
			return fmt.Errorf("%s: %s", ue.Key, ue.Msg)
		}
		return errs[0]
	}
	return nil
}

func encodeYAML(n *yaml.Node) ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		return nil, fmt.Errorf("users import: %w", err)
	}
	return b.Bytes(), nil
}

// WriteUsersFile replaces the users file path with data (mode 0600 for a new file, the old
// mode otherwise), never leaving a half-written file.
func WriteUsersFile(path string, data []byte) error {
	mode := os.FileMode(0o600)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".users-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
