package auth

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/ctibridge/ctibridge/calls"
	"golang.org/x/crypto/bcrypt"
)

// Role is what a user is allowed to do, broadly: see Allowed.
type Role uint8

const (
	RoleUser     Role = iota + 1 // sees all presence; acts on its own endpoints only
	RoleOperator                 // sees and acts on every endpoint of its groups
	RoleAdmin                    // sees and acts on everything, reads switchboard history
)

// String is the role's name in the users file and in JSON.
func (r Role) String() string {
	switch r {
	case RoleUser:
		return "user"
	case RoleOperator:
		return "operator"
	case RoleAdmin:
		return "admin"
	}
	return "unknown"
}

// ParseRole maps a users-file role name to a Role.
func ParseRole(s string) (Role, bool) {
	switch s {
	case "user":
		return RoleUser, true
	case "operator":
		return RoleOperator, true
	case "admin":
		return RoleAdmin, true
	}
	return 0, false
}

// Extra permissions a users file may grant.
const (
	// PermOperatorPanel lets a user see the numbers and names of other
	// people's calls (the operator panel), not act on them.
	PermOperatorPanel = "operator_panel"
	// PermSwitchboardHistory lets a non-admin read the switchboard history.
	PermSwitchboardHistory = "switchboard_history"
)

var knownPermissions = []string{PermOperatorPanel, PermSwitchboardHistory}

// User is one entry of the users file. Its fields must not be modified
// after it was returned by ParseUsers or NewUsers.
type User struct {
	Username     string
	Name         string   // display name
	PasswordHash string   // bcrypt, "$2a$..." / "$2b$..." / "$2y$..."
	Role         Role     // default RoleUser
	Endpoints    []string // extensions the user owns
	Groups       []string
	Permissions  []string // extra permissions: PermOperatorPanel, ...
	Cellphone    string   // the user's mobile number: presence "cellphone" forwards there
	// PBXs, when set, are the only PBXs the user sees and acts on, when
	// several are followed ("default" is the PBX of --ami); empty: all.
	PBXs []string
	// Profile names the user's capability set; "" means the profile named
	// after its role ("user", "operator", "admin"). With a profile, Role
	// is derived from it.
	Profile string
	// Checker, when set and PasswordHash is empty, checks the password
	// instead (a directory: an LDAP bind). ctibridge then stores none.
	Checker PasswordChecker
	// Source names where the user comes from: "" for the users file,
	// otherwise the directory's name.
	Source string

	// Derived by NewUsers.
	caps    Caps            // the profile's, plus what Permissions add
	own     map[string]bool // Endpoints
	scope   map[string]bool // endpoints it may act on (own, plus its groups' for an operator)
	perms   map[string]bool
	viewKey string
	pbxKey  string // PBXs joined by ",": PBXKey
}

// Caps returns the user's capabilities: its profile's and its extra
// permissions'.
func (u *User) Caps() Caps { return u.caps }

// Has reports whether the user was granted the extra permission p.
func (u *User) Has(p string) bool { return u.perms[p] }

// Owns reports whether endpoint is one of the user's own.
func (u *User) Owns(endpoint string) bool { return u.own[endpoint] }

// Scope returns the endpoints the user may act on, sorted; nil for an
// admin, who may act on every endpoint.
func (u *User) Scope() []string {
	if u.Role == RoleAdmin {
		return nil
	}
	out := make([]string, 0, len(u.scope))
	for e := range u.scope {
		out = append(out, e)
	}
	slices.Sort(out)
	return out
}

// Users is an immutable set of users, safe to share between goroutines.
type Users struct {
	byName   map[string]*User
	list     []*User // in file order
	profiles map[string]Caps
}

// Profiles returns the profiles users may be given (name → capabilities).
func (us *Users) Profiles() map[string]Caps {
	if us == nil || us.profiles == nil {
		return DefaultProfiles()
	}
	return maps.Clone(us.profiles)
}

// Lookup returns the user named username.
func (us *Users) Lookup(username string) (*User, bool) {
	if us == nil {
		return nil, false
	}
	u, ok := us.byName[username]
	return u, ok
}

// All returns the users in file order.
func (us *Users) All() []*User {
	if us == nil {
		return nil
	}
	return slices.Clone(us.list)
}

// Len is the number of users.
func (us *Users) Len() int {
	if us == nil {
		return 0
	}
	return len(us.list)
}

// UsersError describes what is wrong in a users file, naming the file, the
// line, the user and the key.
type UsersError struct {
	File string
	Line int    // 0 when unknown
	User string // "" when the problem is not inside one user
	Key  string // "" when the problem is not one key
	Msg  string
}

func (e *UsersError) Error() string {
	var b strings.Builder
	b.WriteString("auth: users file ")
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	if e.User != "" {
		fmt.Fprintf(&b, ": user %q", e.User)
	}
	if e.Key != "" {
		fmt.Fprintf(&b, ": key %q", e.Key)
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	return b.String()
}

// LoadUsers reads and checks a users file.
func LoadUsers(path string) (*Users, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("auth: users file: %w", err)
	}
	return ParseUsers(path, data)
}

// ParseUsers parses a users file (docs/rest.md "Users"); name is used in
// errors. Unknown keys, duplicate users, bad roles or permissions,
// malformed hashes and malformed endpoints are errors. It returns the first
// problem; CheckUsers returns them all.
func ParseUsers(name string, data []byte) (*Users, error) {
	us, errs := parseUsers(name, data)
	if len(errs) > 0 {
		return nil, errs[0]
	}
	return us, nil
}

// CheckUsers parses a users file like ParseUsers but reports every problem
// (at most one per user), for `ctibridge check-config`. The Users are nil
// when there is any problem.
func CheckUsers(name string, data []byte) (*Users, []error) {
	return parseUsers(name, data)
}

func parseUsers(name string, data []byte) (*Users, []error) {
	one := func(e *UsersError) (*Users, []error) { return nil, []error{e} }
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return one(&UsersError{File: name, Msg: "empty file: want a top-level \"users:\" list"})
		}
		return one(&UsersError{File: name, Msg: err.Error()})
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return one(&UsersError{File: name, Line: doc.Line, Msg: "want a mapping with a \"users:\" list"})
	}
	top := doc.Content[0]
	var list, profNode *yaml.Node
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := top.Content[i], top.Content[i+1]
		var dst **yaml.Node
		switch k.Value {
		case "users":
			dst = &list
		case "profiles":
			dst = &profNode
		default:
			return one(&UsersError{File: name, Line: k.Line, Key: k.Value, Msg: "unknown key (want \"users\" or \"profiles\")"})
		}
		if *dst != nil {
			return one(&UsersError{File: name, Line: k.Line, Key: k.Value, Msg: "given twice"})
		}
		*dst = v
	}
	profiles := DefaultProfiles()
	if profNode != nil {
		var err error
		if profiles, err = parseProfiles(name, profNode); err != nil {
			return nil, []error{err}
		}
	}
	if list == nil {
		return one(&UsersError{File: name, Line: top.Line, Msg: "no \"users:\" list"})
	}
	if list.Kind != yaml.SequenceNode {
		if list.Kind == yaml.ScalarNode && list.Tag == "!!null" {
			us, err := NewUsersWithProfiles(nil, profiles) // "users:" with nothing: no users
			if err != nil {
				return nil, []error{err}
			}
			return us, nil
		}
		return one(&UsersError{File: name, Line: list.Line, Key: "users", Msg: "want a list of users"})
	}
	users := make([]User, 0, len(list.Content))
	lines := map[string]int{}
	var errs []error
	for _, n := range list.Content {
		u, err := parseUser(name, n)
		if _, ok := profiles[u.Profile]; err == nil && u.Profile != "" && !ok {
			err = &UsersError{File: name, Line: n.Line, User: u.Username, Key: "profile",
				Msg: fmt.Sprintf("unknown profile %q (known: %s)", u.Profile, strings.Join(ProfileNames(profiles), ", "))}
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if first, dup := lines[u.Username]; dup {
			errs = append(errs, &UsersError{File: name, Line: n.Line, User: u.Username, Key: "username",
				Msg: fmt.Sprintf("duplicate user (first defined at line %d)", first)})
			continue
		}
		lines[u.Username] = n.Line
		users = append(users, u)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	us, err := NewUsersWithProfiles(users, profiles)
	if err != nil {
		return one(&UsersError{File: name, Msg: err.Error()})
	}
	return us, nil
}

func parseUser(file string, n *yaml.Node) (User, error) {
	var u User
	if n.Kind != yaml.MappingNode {
		return u, &UsersError{File: file, Line: n.Line, Msg: "each user must be a mapping (username:, password_hash:, role:, ...)"}
	}
	// Find the username first so that every later error can name the user.
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == "username" {
			u.Username = n.Content[i+1].Value
		}
	}
	fail := func(line int, key, format string, args ...any) (User, error) {
		return User{}, &UsersError{File: file, Line: line, User: u.Username, Key: key, Msg: fmt.Sprintf(format, args...)}
	}
	if err := checkName(u.Username); err != nil {
		return fail(n.Line, "username", "%v", err)
	}
	seen := map[string]bool{}
	role := ""
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if seen[k.Value] {
			return fail(k.Line, k.Value, "given twice")
		}
		seen[k.Value] = true
		switch k.Value {
		case "username":
			if v.Kind != yaml.ScalarNode {
				return fail(v.Line, k.Value, "want a string")
			}
		case "name", "password_hash", "role", "cellphone", "profile":
			if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
				return fail(v.Line, k.Value, "want a string")
			}
			if err := u.setScalar(k.Value, v.Value, &role); err != nil {
				return fail(v.Line, k.Value, "%v", err)
			}
		case "endpoints", "groups", "permissions", "pbxs":
			vals, err := stringList(v)
			if err == nil {
				err = u.setList(k.Value, vals)
			}
			if err != nil {
				return fail(v.Line, k.Value, "%v", err)
			}
		default:
			return fail(k.Line, k.Value, "unknown key (known: username, name, password_hash, role, profile, endpoints, groups, permissions, cellphone, pbxs)")
		}
	}
	if u.PasswordHash == "" {
		return fail(n.Line, "password_hash", "missing (make one with `ctibridge passwd`)")
	}
	if role == "" {
		u.Role = RoleUser
	}
	return u, nil
}

// errRoleAndProfile: a user gives one or the other.
var errRoleAndProfile = errors.New("give a role or a profile, not both (a profile sets the role)")

// setScalar checks and sets one of a user's string keys; role records a
// role given by name.
func (u *User) setScalar(key, val string, role *string) error {
	switch key {
	case "name":
		u.Name = val
	case "cellphone":
		if err := checkCellphone(val); err != nil {
			return err
		}
		u.Cellphone = val
	case "password_hash":
		if err := checkHash(val); err != nil {
			return err
		}
		u.PasswordHash = val
	case "profile":
		if *role != "" {
			return errRoleAndProfile
		}
		if err := checkName(val); err != nil {
			return err
		}
		u.Profile = val
	case "role":
		if u.Profile != "" {
			return errRoleAndProfile
		}
		*role = val
		r, ok := ParseRole(val)
		if !ok {
			return fmt.Errorf("unknown role %q (want user, operator or admin)", val)
		}
		u.Role = r
	}
	return nil
}

// setList checks and sets one of a user's list keys.
func (u *User) setList(key string, vals []string) error {
	for _, s := range vals {
		var err error
		switch key {
		case "endpoints":
			err = CheckEndpoint(s)
		case "groups":
			err = checkName(s)
		case "pbxs":
			err = checkPBX(s)
		case "permissions":
			if !slices.Contains(knownPermissions, s) {
				err = fmt.Errorf("unknown permission %q (known: %s)", s, strings.Join(knownPermissions, ", "))
			}
		}
		if err != nil {
			return err
		}
	}
	switch key {
	case "endpoints":
		u.Endpoints = vals
	case "groups":
		u.Groups = vals
	case "permissions":
		u.Permissions = vals
	case "pbxs":
		u.PBXs = vals
	}
	return nil
}

func stringList(v *yaml.Node) ([]string, error) {
	if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
		return nil, nil
	}
	if v.Kind != yaml.SequenceNode {
		return nil, errors.New("want a list of strings")
	}
	out := make([]string, 0, len(v.Content))
	for _, e := range v.Content {
		if e.Kind != yaml.ScalarNode || e.Tag == "!!null" {
			return nil, errors.New("want a list of strings")
		}
		out = append(out, e.Value)
	}
	return out, nil
}

// checkName accepts user and group names: 1 to 64 printable characters
// without spaces.
// CheckName reports whether s is a valid user, group or profile name;
// directories skip entries whose names are not.
func CheckName(s string) error { return checkName(s) }

func checkName(s string) error {
	if s == "" {
		return errors.New("missing or empty")
	}
	if len(s) > 64 {
		return errors.New("longer than 64 bytes")
	}
	for _, c := range s {
		if c <= ' ' || c == 0x7f {
			return fmt.Errorf("%q contains a space or control character", s)
		}
	}
	return nil
}

// checkCellphone: a number a phone can dial (it becomes a forward target
// in AstDB and an AMI header): digits, *, # and +, at most 32.
func checkCellphone(s string) error {
	if s == "" || len(s) > 32 || strings.Trim(s, "0123456789*#+") != "" {
		return fmt.Errorf("cellphone %q: want digits, *, # and + only, at most 32", s)
	}
	return nil
}

// CheckEndpoint accepts an endpoint (extension) name: 1 to 64 characters
// from [0-9A-Za-z_.+*#-]. It is what may safely be put in a channel name or
// an AstDB key.
//
// An endpoint of a named PBX is qualified "site2:201" (ForPBX): a name of
// a-z 0-9 - _ starting with a letter, a colon, the endpoint.
func CheckEndpoint(s string) error {
	if s == "" {
		return errors.New("empty endpoint")
	}
	if len(s) > 64 {
		return errors.New("endpoint longer than 64 bytes")
	}
	if pbx, local, ok := strings.Cut(s, string(calls.PBXSep)); ok && calls.CheckPBXName(pbx) == nil && local != "" {
		s = local // then checked as any endpoint; any other colon is refused below
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case c == '_' || c == '.' || c == '+' || c == '*' || c == '#' || c == '-':
		default:
			return fmt.Errorf("endpoint %q: only 0-9 A-Z a-z _ . + * # - allowed", s)
		}
	}
	return nil
}

// checkHash accepts a well-formed bcrypt hash.
func checkHash(h string) error {
	if _, err := bcrypt.Cost([]byte(h)); err != nil || len(h) != 60 {
		return errors.New("not a bcrypt hash (make one with `ctibridge passwd`)")
	}
	return nil
}

// NewUsers is NewUsersWithProfiles with the default profiles.
func NewUsers(list []User) (*Users, error) { return NewUsersWithProfiles(list, nil) }

// NewUsersWithProfiles checks users and derives what the permission
// checks need: each user's capabilities (its profile's, or its role's
// default profile's, plus its extra permissions'), own endpoints and, with
// CapGroupScope, every endpoint owned by a user sharing one of its groups.
// profiles nil means DefaultProfiles. It is what ParseUsers calls; `demo`
// and the directories call it with the users they make.
func NewUsersWithProfiles(list []User, profiles map[string]Caps) (*Users, error) {
	if profiles == nil {
		profiles = DefaultProfiles()
	}
	us := &Users{byName: make(map[string]*User, len(list)), profiles: profiles}
	groupEndpoints := map[string][]string{}
	for i := range list {
		u := list[i] // copy: the caller's slice is not retained
		if err := checkName(u.Username); err != nil {
			return nil, fmt.Errorf("user %q: username: %w", u.Username, err)
		}
		if _, dup := us.byName[u.Username]; dup {
			return nil, fmt.Errorf("user %q: duplicate user", u.Username)
		}
		if u.Role == 0 {
			u.Role = RoleUser
		}
		if u.Role > RoleAdmin {
			return nil, fmt.Errorf("user %q: role: unknown role %d", u.Username, u.Role)
		}
		prof := u.Profile
		if prof == "" {
			prof = u.Role.String()
		}
		caps, ok := profiles[prof]
		if !ok {
			return nil, fmt.Errorf("user %q: profile: unknown profile %q", u.Username, prof)
		}
		u.Role = roleOf(caps) // the role follows the capabilities
		directoryChecked := u.Checker != nil && u.PasswordHash == ""
		if err := checkHash(u.PasswordHash); err != nil && !directoryChecked {
			return nil, fmt.Errorf("user %q: password_hash: %w", u.Username, err)
		}
		u.Endpoints = slices.Clone(u.Endpoints)
		u.Groups = slices.Clone(u.Groups)
		u.Permissions = slices.Clone(u.Permissions)
		u.own = map[string]bool{}
		for _, e := range u.Endpoints {
			if err := CheckEndpoint(e); err != nil {
				return nil, fmt.Errorf("user %q: endpoints: %w", u.Username, err)
			}
			u.own[e] = true
		}
		u.perms = map[string]bool{}
		for _, p := range u.Permissions {
			if !slices.Contains(knownPermissions, p) {
				return nil, fmt.Errorf("user %q: permissions: unknown permission %q", u.Username, p)
			}
			u.perms[p] = true
			caps |= permissionCaps[p]
		}
		u.caps = caps
		for _, g := range u.Groups {
			groupEndpoints[g] = append(groupEndpoints[g], u.Endpoints...)
		}
		p := &u
		us.byName[u.Username] = p
		us.list = append(us.list, p)
	}
	for _, u := range us.list {
		u.scope = map[string]bool{}
		for e := range u.own {
			u.scope[e] = true
		}
		if u.caps.Has(CapGroupScope) {
			for _, g := range u.Groups {
				for _, e := range groupEndpoints[g] {
					u.scope[e] = true
				}
			}
		}
		u.viewKey = viewKey(u)
		u.pbxKey = strings.Join(u.PBXs, ",")
	}
	return us, nil
}
