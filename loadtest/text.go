package loadtest

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// table draws an autocannon-style box table.
func table(w io.Writer, rows [][]string) {
	widths := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, c := range r {
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	line := func(l, m, r string) {
		var b strings.Builder
		b.WriteString(l)
		for i, wd := range widths {
			if i > 0 {
				b.WriteString(m)
			}
			b.WriteString(strings.Repeat("─", wd+2))
		}
		b.WriteString(r + "\n")
		io.WriteString(w, b.String())
	}
	line("┌", "┬", "┐")
	for i, r := range rows {
		if i > 0 {
			line("├", "┼", "┤")
		}
		var b strings.Builder
		for j, c := range r {
			fmt.Fprintf(&b, "│ %s%s ", c, strings.Repeat(" ", widths[j]-utf8.RuneCountInString(c)))
		}
		b.WriteString("│\n")
		io.WriteString(w, b.String())
	}
	line("└", "┴", "┘")
}

// fmtMS renders a duration in milliseconds, with up to two decimals.
func fmtMS(d time.Duration) string {
	v := float64(d) / 1e6
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f ms", v)
	case v >= 10:
		return fmt.Sprintf("%.1f ms", v)
	}
	return fmt.Sprintf("%.2f ms", v)
}

// fmtBytes renders a size with decimal units, as autocannon does.
func fmtBytes(v float64) string {
	for _, u := range []string{"B", "kB", "MB", "GB"} {
		if v < 1000 || u == "GB" {
			if u == "B" {
				return fmt.Sprintf("%.0f B", v)
			}
			return fmt.Sprintf("%.2f %s", v, u)
		}
		v /= 1000
	}
	return ""
}

func fmtCount(v float64) string {
	if v >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

func latencyRow(name string, h *Histogram) []string {
	return []string{name, fmtMS(h.Quantile(0.025)), fmtMS(h.Quantile(0.5)), fmtMS(h.Quantile(0.9)),
		fmtMS(h.Quantile(0.975)), fmtMS(h.Quantile(0.99)), fmtMS(h.Quantile(0.999)), fmtMS(h.Mean()),
		fmtMS(h.Stdev()), fmtMS(h.Max())}
}

var latencyHead = []string{"Stat", "2.5%", "50%", "90%", "97.5%", "99%", "99.9%", "Avg", "Stdev", "Max"}

// WriteText prints the report as autocannon does: a latency table, a
// requests/s and bytes/s table over the per-second samples, the totals,
// then errors, counters and notes.
func (r *Report) WriteText(w io.Writer) {
	unit := map[string]string{"http": "Req/Sec", "ws": "Msg/Sec", "e2e": "Calls/Sec"}[r.Mode]
	name := map[string]string{"http": "Latency", "ws": "Change→client", "e2e": "INVITE→ringing"}[r.Mode]
	rows := [][]string{latencyHead, latencyRow(name, r.Latency)}
	for _, s := range r.Extra {
		rows = append(rows, latencyRow(s.Name, s.Latency))
	}
	table(w, rows)
	reqs, bytes := r.perSecond()
	rs, bs := statsOf(reqs), statsOf(bytes)
	rateRows := [][]string{
		{"Stat", "1%", "2.5%", "50%", "97.5%", "Avg", "Stdev", "Min", "Max"},
		{unit, fmtCount(rs.P1), fmtCount(rs.P2_5), fmtCount(rs.P50), fmtCount(rs.P97_5), fmtCount(rs.Avg), fmtCount(rs.Stdev), fmtCount(rs.Min), fmtCount(rs.Max)},
	}
	if r.Mode != "e2e" {
		rateRows = append(rateRows, []string{"Bytes/Sec", fmtBytes(bs.P1), fmtBytes(bs.P2_5), fmtBytes(bs.P50), fmtBytes(bs.P97_5), fmtBytes(bs.Avg), fmtBytes(bs.Stdev), fmtBytes(bs.Min), fmtBytes(bs.Max)})
	}
	table(w, rateRows)
	fmt.Fprintf(w, "\n%s counts sampled once per second; latencies from a log-linear histogram (<1%% error).\n", unit)
	what := map[string]string{"http": "requests", "ws": "messages", "e2e": "calls"}[r.Mode]
	fmt.Fprintf(w, "\n%d %s in %.2fs (%.0f/s), %s read", r.Requests, what, r.Elapsed.Seconds(), r.RequestsPerSecond(), fmtBytes(float64(r.Bytes)))
	if r.Mode == "http" {
		fmt.Fprintf(w, ", %d non-2xx", r.Non2xx)
		for _, k := range sortedIntKeys(r.Status) {
			fmt.Fprintf(w, " (%d: %d)", k, r.Status[k])
		}
	}
	fmt.Fprintf(w, "\nload tool CPU %.2f cores", r.ClientCPU)
	if r.MachineCPU > 0 {
		fmt.Fprintf(w, "; machine CPUs %.0f%% busy", r.MachineCPU*100)
	}
	fmt.Fprintln(w)
	for _, k := range slices.Sorted(maps.Keys(r.Counters)) {
		fmt.Fprintf(w, "%s: %d\n", k, r.Counters[k])
	}
	if n := r.ErrorCount(); n > 0 {
		fmt.Fprintf(w, "%d errors:\n", n)
		for _, k := range slices.Sorted(maps.Keys(r.Errors)) {
			fmt.Fprintf(w, "  %-20s %8d   first: %s\n", k, r.Errors[k], r.FirstErrors[k])
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}

func sortedIntKeys(m map[int]uint64) []int {
	var keys []int
	for k := range m {
		keys = append(keys, k)
	}
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	return keys
}
