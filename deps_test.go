// Package ctibridge_test holds repository-wide checks: the direction of
// imports between packages (docs/design.md, "Dependency direction"),
// that the shipped binary links none of the load lab's packages, that
// every package documents itself, and (docs_test.go) that no file
// points outside the repository or to a page that does not exist.
package ctibridge_test

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/ctibridge/ctibridge/"

// rule says what a package may depend on, transitively.
type rule struct {
	pkg string
	// stdOnly: no module other than the standard library.
	stdOnly bool
	// allowed: project packages it may reach (others are banned).
	allowed []string
	// banned: packages (standard or not) it must not reach, even indirectly.
	banned []string
	// bannedDirect: packages it must not import itself (it may reach them
	// through ami, whose client needs the network).
	bannedDirect []string
}

var rules = []rule{
	{pkg: "ami", stdOnly: true},
	{pkg: "ami/amievent", allowed: []string{"ami"}, banned: []string{"testing"}},
	{pkg: "ami/amitest", allowed: []string{"ami", "ami/amiproxy"}},
	{pkg: "ami/amiproxy", allowed: []string{"ami"}, banned: []string{"testing"}},
	{pkg: "calls", allowed: []string{"ami"}, banned: []string{"net/http", "database/sql", "os/exec"}, bannedDirect: []string{"net", "os", "net/http", "time/tzdata"}},
	{pkg: "link", allowed: []string{"ami", "calls"}},
	{pkg: "admin", allowed: []string{}},
	{pkg: "panel", allowed: []string{}},
	{pkg: "auth", allowed: []string{"ami", "calls"}},
	{pkg: "auth/authdb", allowed: []string{"ami", "calls", "auth", "sqldb"}},
	{pkg: "directory", allowed: []string{"ami", "calls", "auth"}},
	{pkg: "ws", allowed: []string{"ami", "calls", "auth"}},
	{pkg: "nethcti/shape", stdOnly: true},
	{pkg: "nethcti/sio", allowed: []string{"ami", "calls", "auth", "nethcti/shape"}},
	{pkg: "httpserve", stdOnly: true},
	{pkg: "config", allowed: []string{}},
	{pkg: "rest", allowed: []string{"ami", "calls", "auth", "history", "phonebook", "sqldb", "upstream", "wal"}},
	{pkg: "nethcti", allowed: []string{"ami", "calls", "auth", "rest", "history", "phonebook", "sqldb", "upstream", "wal", "nethcti/shape"}},
	{pkg: "sqldb", allowed: []string{}},
	{pkg: "dbtest/pgcluster", stdOnly: true},
	{pkg: "phonebook", allowed: []string{"sqldb", "upstream"}},
	{pkg: "history", allowed: []string{"ami", "calls", "sqldb", "upstream", "wal"}},
	{pkg: "wal", stdOnly: true},
	{pkg: "webhook", allowed: []string{"ami", "calls", "history", "sqldb", "upstream", "wal"}},
	{pkg: "pbxsim", allowed: []string{"ami", "ami/amievent"}},
	{pkg: "bus", allowed: []string{"ami", "calls", "link"}},
	// The PBXs one bridge follows: above bus and link, below cmd.
	{pkg: "site", allowed: []string{"ami", "calls", "link", "bus"}},
	{pkg: "bus/natstest", allowed: []string{"bus/natstest/natscluster"}},
	{pkg: "bus/natstest/natscluster", stdOnly: true},
	{pkg: "bus/natstest/netns"},
	{pkg: "sipp", stdOnly: true},
	{pkg: "sdnotify", stdOnly: true},
	{pkg: "upstream", stdOnly: true},
	{pkg: "loadtest", allowed: []string{"ami", "ami/amiproxy", "dbtest/pgcluster", "bus/natstest/natscluster", "bus/natstest/netns", "pbxsim", "sipp", "loadtest/internal/wsframe", "loadtest/synthpbx", "ami/amievent"}, banned: []string{"testing"}},
	{pkg: "loadtest/internal/wsframe", stdOnly: true},
	{pkg: "loadtest/synthpbx", allowed: []string{"ami", "ami/amievent"}, banned: []string{"testing"}},
	// The lab's wsbench, measuring the hub in-process: the one load
	// package that imports ws, and never rest.
	{pkg: "loadtest/wsbench", allowed: []string{"ami", "calls", "auth", "ws", "loadtest", "loadtest/internal/wsframe", "loadtest/synthpbx", "ami/amiproxy", "ami/amievent", "dbtest/pgcluster", "bus/natstest/natscluster", "bus/natstest/netns", "pbxsim", "sipp"}},
}

type listed struct {
	path     string
	standard bool
}

func goListDeps(t *testing.T, pkg string) ([]listed, bool) {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{.Standard}}", "./"+pkg).CombinedOutput()
	if err != nil {
		if strings.Contains(string(out), "matched no packages") || strings.Contains(string(out), "directory not found") || strings.Contains(string(out), "no Go files") {
			return nil, false // not written yet
		}
		t.Fatalf("go list %s: %v\n%s", pkg, err, out)
	}
	var deps []listed
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, std, _ := strings.Cut(line, " ")
		deps = append(deps, listed{path, std == "true"})
	}
	return deps, true
}

func TestDependencyDirection(t *testing.T) {
	for _, r := range rules {
		t.Run(r.pkg, func(t *testing.T) {
			deps, ok := goListDeps(t, r.pkg)
			if !ok {
				t.Skipf("package %s does not exist yet", r.pkg)
			}
			if len(r.bannedDirect) > 0 {
				out, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, "./"+r.pkg).Output()
				if err != nil {
					t.Fatal(err)
				}
				for _, imp := range strings.Fields(string(out)) {
					if contains(r.bannedDirect, imp) {
						t.Errorf("%s imports %s: it must stay free of I/O", r.pkg, imp)
					}
				}
			}
			for _, d := range deps {
				if d.path == module+r.pkg {
					continue
				}
				for _, b := range r.banned {
					if d.path == b {
						t.Errorf("%s depends on %s, which docs/design.md bans", r.pkg, d.path)
					}
				}
				if d.standard {
					continue
				}
				if r.stdOnly {
					t.Errorf("%s must depend on the standard library only, but reaches %s", r.pkg, d.path)
					continue
				}
				if own, ok := strings.CutPrefix(d.path, module); ok && !contains(r.allowed, own) {
					t.Errorf("%s must not import %s (allowed: %v)", r.pkg, own, r.allowed)
				}
			}
		})
	}
}

// labPackages are the load lab's packages and the test harnesses (they
// start initdb, nats-server, fault proxies): the lab binary
// (cmd/ctibridge-lab) holds them, the shipped ctibridge none. A path
// ending in "/" bans the package and everything under it.
var labPackages = []string{"loadtest/", "dbtest/", "bus/natstest/", "ami/amiproxy", "ami/amitest", "rest/resttest", "cmd/ctibridge-lab"}

// labDeps is what of deps belongs to the lab (labPackages).
func labDeps(deps []listed) []string {
	var lab []string
	for _, d := range deps {
		own, ok := strings.CutPrefix(d.path, module)
		if !ok {
			continue
		}
		for _, p := range labPackages {
			if own == strings.TrimSuffix(p, "/") || strings.HasSuffix(p, "/") && strings.HasPrefix(own, p) {
				lab = append(lab, own)
				break
			}
		}
	}
	return lab
}

// TestProductHoldsNoLab: the shipped binary (packaging/ builds
// cmd/ctibridge) links none of the lab's packages.
func TestProductHoldsNoLab(t *testing.T) {
	deps, ok := goListDeps(t, "cmd/ctibridge")
	if !ok {
		t.Fatal("no cmd/ctibridge")
	}
	if lab := labDeps(deps); len(lab) > 0 {
		t.Errorf("cmd/ctibridge depends on the lab's %v: move what it needs out of the lab, or the code into cmd/ctibridge-lab", lab)
	}
	// The check itself: it sees a lab package among the deps, at any depth
	// under a banned directory, and nothing else.
	fake := []listed{{module + "bus", false}, {module + "loadtest/synthpbx", false}, {module + "dbtest/pgcluster", false},
		{module + "ami/amiproxy", false}, {module + "ami/amievent", false}, {module + "loadtestx", false}, {"net/http", true}}
	if got := strings.Join(labDeps(fake), " "); got != "loadtest/synthpbx dbtest/pgcluster ami/amiproxy" {
		t.Errorf("labDeps(fake) = %q", got)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestPackagesDocumented fails when a package has no package comment.
func TestPackagesDocumented(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}\t{{.Name}}\t{{len .GoFiles}}\t{{.Doc}}", "./...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.SplitN(line, "\t", 4)
		if len(f) < 4 || f[2] == "0" {
			continue // test-only package
		}
		if strings.TrimSpace(f[3]) == "" {
			t.Errorf("package %s has no package documentation (add a doc.go)", f[0])
		}
	}
}
