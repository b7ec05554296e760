package loadtest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"html"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ProfileResult lists what Profile wrote and what it could not.
type ProfileResult struct {
	Files  []string
	Errors []string
}

// Profile captures the target's profiles from its admin listener's
// /debug/pprof (admin is "http://host:port"): a CPU profile over d (at
// least 1 s) starting now, then heap, mutex, block and goroutine profiles.
// It writes them into dir as cpu.pprof, heap.pprof, ... and, when the go
// command is on PATH, draws a flame graph of the CPU profile (cpu-flame.svg,
// from `go tool pprof -traces`), plus pprof's call graph (cpu-graph.svg)
// when graphviz's dot is installed too. Mutex and block profiles are empty
// unless the target enabled them (runtime.SetMutexProfileFraction,
// SetBlockProfileRate).
func Profile(ctx context.Context, admin, dir string, d time.Duration) *ProfileResult {
	res := &ProfileResult{}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		res.Errors = append(res.Errors, err.Error())
		return res
	}
	secs := max(int(d/time.Second), 1)
	client := &http.Client{Timeout: d + 30*time.Second}
	fetch := func(name, path string) string {
		req, err := http.NewRequestWithContext(ctx, "GET", strings.TrimSuffix(admin, "/")+path, nil)
		if err != nil {
			res.Errors = append(res.Errors, fmt.Sprintf("%s: %v", name, err))
			return ""
		}
		r, err := client.Do(req)
		if err != nil {
			res.Errors = append(res.Errors, fmt.Sprintf("%s: %v", name, err))
			return ""
		}
		defer r.Body.Close()
		if r.StatusCode != 200 {
			b, _ := io.ReadAll(io.LimitReader(r.Body, 300))
			res.Errors = append(res.Errors, fmt.Sprintf("%s: HTTP %d: %s", name, r.StatusCode, bytes.TrimSpace(b)))
			return ""
		}
		p := filepath.Join(dir, name)
		f, err := os.Create(p)
		if err == nil {
			_, err = io.Copy(f, r.Body)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			res.Errors = append(res.Errors, fmt.Sprintf("%s: %v", name, err))
			return ""
		}
		res.Files = append(res.Files, p)
		return p
	}
	cpu := fetch("cpu.pprof", "/debug/pprof/profile?seconds="+strconv.Itoa(secs))
	for _, n := range []string{"heap", "mutex", "block", "goroutine"} {
		fetch(n+".pprof", "/debug/pprof/"+n)
	}
	if cpu == "" {
		return res
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		res.Errors = append(res.Errors, "no flame graph: the go command is not on PATH (go tool pprof reads the profile)")
		return res
	}
	out, err := exec.CommandContext(ctx, goBin, "tool", "pprof", "-traces", cpu).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = bytes.TrimSpace(ee.Stderr)
		}
		res.Errors = append(res.Errors, fmt.Sprintf("go tool pprof -traces: %v: %s", err, trunc(stderr)))
	} else {
		p := filepath.Join(dir, "cpu-flame.svg")
		if err := os.WriteFile(p, FlameGraph(parseTraces(out), "CPU "+admin), 0o644); err != nil {
			res.Errors = append(res.Errors, err.Error())
		} else {
			res.Files = append(res.Files, p)
		}
	}
	if _, err := exec.LookPath("dot"); err == nil {
		p := filepath.Join(dir, "cpu-graph.svg")
		if err := exec.CommandContext(ctx, goBin, "tool", "pprof", "-svg", "-output", p, cpu).Run(); err == nil {
			res.Files = append(res.Files, p)
		}
	}
	return res
}

// stack is one sampled call stack, root first, and its weight.
type stack struct {
	frames []string
	value  float64
}

// parseTraces reads `go tool pprof -traces` output: blocks separated by
// "-----------+---" lines, each a value then the frames, leaf first.
func parseTraces(b []byte) []stack {
	var out []stack
	var cur *stack
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "-----------+") {
			if cur != nil && len(cur.frames) > 0 {
				out = append(out, *cur)
			}
			cur = &stack{}
			continue
		}
		if cur == nil {
			continue
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(cur.frames) == 0 && cur.value == 0 {
			if v, ok := parseValue(f[0]); ok {
				cur.value = v
				f = f[1:]
				if len(f) == 0 {
					continue
				}
			}
		}
		cur.frames = append([]string{f[0]}, cur.frames...) // leaf first in the text
	}
	if cur != nil && len(cur.frames) > 0 {
		out = append(out, *cur)
	}
	return out
}

// parseValue reads "820ms", "1.2s", "10" (a count) or "4kB".
func parseValue(s string) (float64, bool) {
	if d, err := time.ParseDuration(s); err == nil {
		return float64(d), true
	}
	i := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := s, ""
	if i >= 0 {
		num, unit = s[:i], s[i:]
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, false
	}
	mult := map[string]float64{"": 1, "B": 1, "kB": 1e3, "MB": 1e6, "GB": 1e9}[unit]
	if mult == 0 {
		return 0, false
	}
	return v * mult, true
}

// frameNode is a node of the merged call tree.
type frameNode struct {
	name     string
	value    float64
	children map[string]*frameNode
}

// FlameGraph draws stacks as a flame graph: an SVG with one box per frame,
// width proportional to its samples, callers below callees, with the
// frame's name and share as a tooltip.
func FlameGraph(stacks []stack, title string) []byte {
	root := &frameNode{name: "all", children: map[string]*frameNode{}}
	depth := 0
	for _, s := range stacks {
		n := root
		n.value += s.value
		for _, f := range s.frames {
			c := n.children[f]
			if c == nil {
				c = &frameNode{name: f, children: map[string]*frameNode{}}
				n.children[f] = c
			}
			c.value += s.value
			n = c
		}
		depth = max(depth, len(s.frames))
	}
	const width, rowH = 1200.0, 16.0
	height := float64(depth+1)*rowH + 40
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="monospace" font-size="11">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="#fff"/><text x="6" y="16" font-size="13">%s (%d stacks; width = share of samples)</text>`+"\n", html.EscapeString(title), len(stacks))
	if root.value == 0 {
		b.WriteString("</svg>\n")
		return b.Bytes()
	}
	var draw func(n *frameNode, x float64, level int)
	draw = func(n *frameNode, x float64, level int) {
		w := n.value / root.value * width
		if w < 0.5 {
			return
		}
		y := height - float64(level+1)*rowH - 4
		hue := 20 + (len(n.name)*37)%40
		pct := 100 * n.value / root.value
		fmt.Fprintf(&b, `<g><title>%s (%.2f%%)</title><rect x="%.1f" y="%.1f" width="%.1f" height="%.0f" fill="hsl(%d,90%%,%d%%)" stroke="#fff" stroke-width="0.5"/>`,
			html.EscapeString(n.name), pct, x, y, w, rowH-1, hue, 55+level%3*5)
		if chars := int(w / 7); chars >= 3 {
			label := n.name
			if len(label) > chars {
				label = label[:chars-2] + ".."
			}
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f">%s</text>`, x+2, y+rowH-5, html.EscapeString(label))
		}
		b.WriteString("</g>\n")
		kids := make([]*frameNode, 0, len(n.children))
		for _, c := range n.children {
			kids = append(kids, c)
		}
		sort.Slice(kids, func(i, j int) bool { return kids[i].name < kids[j].name })
		cx := x
		for _, c := range kids {
			draw(c, cx, level+1)
			cx += c.value / root.value * width
		}
	}
	draw(root, 0, 0)
	b.WriteString("</svg>\n")
	return b.Bytes()
}
