package pbxsim

import (
	"bufio"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/ctibridge/ctibridge/ami"
)

// TestDocsRESTActions walks the REST API's action list (rest/actions.go)
// and docs/pbxsim.md's table of them: every action must be listed as
// simulated, partly simulated or not simulated, and every AMI action a
// (partly) simulated one sends must be one pbxsim knows.
func TestDocsRESTActions(t *testing.T) {
	src, err := os.ReadFile("../rest/actions.go")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range regexp.MustCompile(`\bact\("([a-z_]+)"`).FindAllSubmatch(src, -1) {
		names = append(names, string(m[1]))
	}
	if len(names) < 10 {
		t.Fatalf("found only %d actions in rest/actions.go: %v", len(names), names)
	}
	f, err := os.Open("../docs/pbxsim.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type row struct{ ami, status string }
	rows := map[string]row{}
	inTable := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			inTable = line == "## REST actions against pbxsim"
		}
		if !inTable || !strings.HasPrefix(line, "| ") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 3 || strings.TrimSpace(cells[0]) == "REST action" || strings.HasPrefix(cells[0], "---") {
			continue // the header and its rule
		}
		rows[strings.TrimSpace(cells[0])] = row{strings.TrimSpace(cells[1]), strings.TrimSpace(cells[2])}
	}

	p := startPBX(t, Config{})
	capt := startCapture(t, p.AMIAddr())
	known := map[string]bool{}
	for _, n := range names {
		r, ok := rows[n]
		if !ok {
			t.Errorf("REST action %q is not in docs/pbxsim.md's table", n)
			continue
		}
		switch {
		case strings.HasPrefix(r.status, "not simulated"):
			continue
		case strings.HasPrefix(r.status, "simulated"), strings.HasPrefix(r.status, "partly simulated"):
		default:
			t.Errorf("REST action %q: status %q is none of simulated, partly simulated, not simulated", n, r.status)
			continue
		}
		for _, a := range strings.Split(r.ami, ",") {
			a = strings.TrimSpace(a)
			if known[a] {
				continue
			}
			res, _ := capt.cli.Do(ctx5(t), ami.NewAction(a))
			if strings.HasPrefix(res.Get("Message"), "Invalid/unknown command") {
				t.Errorf("REST action %q is documented simulated but pbxsim does not know %s", n, a)
				continue
			}
			known[a] = true
		}
	}
	for n := range rows {
		if !strings.Contains(string(src), `act("`+n+`"`) {
			t.Errorf("docs/pbxsim.md lists %q, which is no REST action", n)
		}
	}
}
