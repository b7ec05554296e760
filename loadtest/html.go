package loadtest

import (
	"bytes"
	"fmt"
	"html"
	"math"
	"time"
)

// HTML renders the report as one self-contained page: the summary, a
// latency-over-time plot (p50, p99 and max of each second) and a latency
// histogram per distribution, as inline SVG. It loads nothing from the
// network.
func (r *Report) HTML() []byte {
	var b bytes.Buffer
	esc := html.EscapeString
	fmt.Fprintf(&b, `<!doctype html><html><head><meta charset="utf-8"><title>ctibridge-lab loadtest %s</title>
<style>body{font:14px system-ui,sans-serif;margin:2em;max-width:1000px}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th:first-child,td:first-child{text-align:left}.note{color:#a40}</style></head><body>
<h1>loadtest %s</h1><p>%s<br>started %s, ran %.2f s, %d connections/clients, pipelining %d`,
		esc(r.Mode), esc(r.Mode), esc(r.Target), r.Started.Format(time.RFC3339), r.Elapsed.Seconds(), r.Connections, r.Pipelining)
	if r.Rate > 0 {
		fmt.Fprintf(&b, ", rate %.0f/s", r.Rate)
	}
	fmt.Fprintf(&b, "</p>\n<pre>")
	var txt bytes.Buffer
	r.WriteText(&txt)
	b.WriteString(esc(txt.String()))
	b.WriteString("</pre>\n")
	series := append([]Series{{Name: map[string]string{"http": "request latency", "ws": "change-to-client", "e2e": "INVITE-to-ringing"}[r.Mode], Latency: r.Latency, PerSecond: r.PerSecond}}, r.Extra...)
	for _, s := range series {
		fmt.Fprintf(&b, "<h2>%s</h2>\n", esc(s.Name))
		if len(s.PerSecond) > 0 {
			b.Write(timePlot(s.PerSecond))
		}
		b.Write(histPlot(s.Latency))
	}
	b.WriteString("</body></html>\n")
	return b.Bytes()
}

const plotW, plotH, padL, padB = 900.0, 260.0, 60.0, 30.0

// timePlot draws p50, p99 and max per second.
func timePlot(secs []Second) []byte {
	var b bytes.Buffer
	var top time.Duration
	for _, s := range secs {
		top = max(top, s.Max)
	}
	if top <= 0 {
		top = time.Millisecond
	}
	tmax := secs[len(secs)-1].At.Seconds()
	x := func(t time.Duration) float64 { return padL + t.Seconds()/math.Max(tmax, 1)*(plotW-padL-10) }
	y := func(d time.Duration) float64 { return plotH - padB - float64(d)/float64(top)*(plotH-padB-10) }
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-size="11">`, plotW, plotH)
	axes(&b, fmtMS(top), "0", fmt.Sprintf("%.0f s", tmax))
	for _, l := range []struct {
		color string
		get   func(Second) time.Duration
		name  string
	}{{"#2a7", func(s Second) time.Duration { return s.P50 }, "p50"}, {"#e80", func(s Second) time.Duration { return s.P99 }, "p99"}, {"#c22", func(s Second) time.Duration { return s.Max }, "max"}} {
		b.WriteString(`<polyline fill="none" stroke="` + l.color + `" stroke-width="1.5" points="`)
		for _, s := range secs {
			fmt.Fprintf(&b, "%.1f,%.1f ", x(s.At), y(l.get(s)))
		}
		b.WriteString(`"/>`)
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="14" fill="#2a7">p50</text><text x="%.0f" y="14" fill="#e80">p99</text><text x="%.0f" y="14" fill="#c22">max</text>`, plotW-120, plotW-85, plotW-50)
	b.WriteString("</svg>\n")
	return b.Bytes()
}

// histPlot draws the distribution on a log time axis.
func histPlot(h *Histogram) []byte {
	var b bytes.Buffer
	bars := h.Bars(60)
	if len(bars) == 0 {
		return []byte("<p>no samples</p>\n")
	}
	var top uint64
	for _, br := range bars {
		top = max(top, br.Count)
	}
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-size="11">`, plotW, plotH)
	axes(&b, fmt.Sprint(top), fmtMS(bars[0].Lo), fmtMS(bars[len(bars)-1].Hi)+" (log scale)")
	bw := (plotW - padL - 10) / float64(len(bars))
	for i, br := range bars {
		hgt := float64(br.Count) / float64(top) * (plotH - padB - 10)
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#47a"><title>%s – %s: %d</title></rect>`,
			padL+float64(i)*bw, plotH-padB-hgt, math.Max(bw-1, 1), hgt, fmtMS(br.Lo), fmtMS(br.Hi), br.Count)
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

func axes(b *bytes.Buffer, ytop, xlo, xhi string) {
	fmt.Fprintf(b, `<line x1="%.0f" y1="10" x2="%.0f" y2="%.0f" stroke="#888"/><line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="#888"/>`,
		padL, padL, plotH-padB, padL, plotH-padB, plotW-10, plotH-padB)
	fmt.Fprintf(b, `<text x="2" y="16">%s</text><text x="%.0f" y="%.0f">%s</text><text x="%.0f" y="%.0f" text-anchor="end">%s</text>`,
		html.EscapeString(ytop), padL, plotH-10, html.EscapeString(xlo), plotW-10, plotH-10, html.EscapeString(xhi))
}
