package ctibridge_test

import (
	"bytes"
	"os"
	"os/exec"
	"path"
	"regexp"
	"strings"
	"testing"
)

// outside are strings that only appear when a file points outside the
// repository: the team's pre-project notes and the machine's work tree.
// They are split so that this file does not match itself.
var outside = []string{
	"DESIGN" + ".md",
	"MEASURED" + ".md",
	"../" + "shared",
	"/work" + "/",
}

// trackedFiles lists the repository's files: git's index when there is
// one, else every file under the root but .git.
func trackedFiles(t *testing.T) []string {
	t.Helper()
	if out, err := exec.Command("git", "ls-files", "-z").Output(); err == nil && len(out) > 0 {
		var files []string
		for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
			if _, err := os.Stat(f); err == nil { // deleted but not yet staged
				files = append(files, f)
			}
		}
		return files
	}
	var files []string
	err := walk(".", func(p string) { files = append(files, p) })
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func walk(dir string, f func(string)) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		p := path.Join(dir, e.Name())
		if e.IsDir() {
			if e.Name() == ".git" {
				continue
			}
			if err := walk(p, f); err != nil {
				return err
			}
			continue
		}
		f(p)
	}
	return nil
}

// readText returns a file's content, or nil for binary files.
func readText(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.IndexByte(b[:min(len(b), 8000)], 0) >= 0 {
		return nil
	}
	return b
}

// TestNothingPointsOutside: no file of the repository refers to a
// document or path that is not in it. The design lives in docs/design.md.
func TestNothingPointsOutside(t *testing.T) {
	for _, f := range trackedFiles(t) {
		b := readText(t, f)
		for i, line := range bytes.Split(b, []byte("\n")) {
			for _, s := range outside {
				if bytes.Contains(line, []byte(s)) {
					t.Errorf("%s:%d mentions %q, which is not in the repository (the design is docs/design.md)", f, i+1, s)
				}
			}
		}
	}
}

var (
	// mdLink is the target of a Markdown link: [text](target).
	mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	// docRef is a mention of a page of docs/ in any file.
	docRef = regexp.MustCompile(`\bdocs/[A-Za-z0-9_.-]+\.(?:md|yaml)\b`)
)

// TestDocLinksResolve: every relative Markdown link and every mention of
// docs/<page> names a file of the repository.
func TestDocLinksResolve(t *testing.T) {
	files := trackedFiles(t)
	have := map[string]bool{}
	for _, f := range files {
		have[f] = true
		for d := path.Dir(f); d != "."; d = path.Dir(d) {
			have[d] = true // links to directories
		}
	}
	for _, f := range files {
		b := readText(t, f)
		if b == nil {
			continue
		}
		for _, m := range docRef.FindAll(b, -1) {
			if !have[string(m)] {
				t.Errorf("%s mentions %s, which does not exist", f, m)
			}
		}
		if !strings.HasSuffix(f, ".md") {
			continue
		}
		for _, m := range mdLink.FindAllSubmatch(b, -1) {
			target := string(m[1])
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") || strings.HasPrefix(target, "#") {
				continue
			}
			target, _, _ = strings.Cut(target, "#")
			p := path.Join(path.Dir(f), target)
			if p == ".." || strings.HasPrefix(p, "../") || strings.HasPrefix(target, "/") {
				t.Errorf("%s links to %s, outside the repository", f, m[1])
				continue
			}
			if !have[p] {
				t.Errorf("%s links to %s, which does not exist", f, m[1])
			}
		}
	}
}

// trackerRef is a mention of a tracker issue or of a work session by its
// number (the word, a space, an optional #, digits; any case). Code, help and docs say
// the thing itself: the number means nothing to a reader of the tree.
var trackerRef = regexp.MustCompile(`(?i)\b(?:issue|session)s?\s+#?[0-9]`)

// TestNoTrackerNumbers: no tracked file but testdata (recordings and
// their notes) names an issue or a session by its number.
func TestNoTrackerNumbers(t *testing.T) {
	for _, f := range trackedFiles(t) {
		if f == "docs_test.go" || strings.HasPrefix(f, "testdata/") || strings.Contains(f, "/testdata/") {
			continue
		}
		b := readText(t, f)
		for i, line := range bytes.Split(b, []byte("\n")) {
			if m := trackerRef.Find(line); m != nil {
				t.Errorf("%s:%d names %q: say the thing itself", f, i+1, m)
			}
		}
	}
}
