package loadtest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ctibridge/ctibridge/sipp"
)

// sippBackstop is how long after its last call's end SIPp may run.
const sippBackstop = 45 * time.Second

// placeWithSIPp places the calls with SIPp's register_invite_client
// scenario (each call registers its caller, calls the callee, talks
// cfg.Talk, hangs up) and reads each call's INVITE and 200 OK times from
// SIPp's message trace.
func placeWithSIPp(ctx context.Context, cfg E2EConfig) ([]callRecord, sipp.Result, error) {
	dir, err := os.MkdirTemp("", "loadtest-sipp-")
	if err != nil {
		return nil, sipp.Result{}, err
	}
	defer os.RemoveAll(dir)
	var csv strings.Builder
	csv.WriteString("SEQUENTIAL\n")
	for i := range cfg.Callers {
		auth := ""
		if cfg.Secret != "" {
			auth = fmt.Sprintf("[authentication username=%s password=%s]", cfg.Callers[i], cfg.Secret)
		}
		fmt.Fprintf(&csv, "%s;%s;%s\n", cfg.Callers[i], cfg.dialOf(cfg.Callees[i]), auth)
	}
	inf := filepath.Join(dir, "calls.csv")
	if err := os.WriteFile(inf, []byte(csv.String()), 0o644); err != nil {
		return nil, sipp.Result{}, err
	}
	msgs := filepath.Join(dir, "messages.log")
	n := int(math.Round(cfg.Rate * cfg.Duration.Seconds()))
	// SIPp stops by itself after n calls; the timeout is a backstop, the
	// context the user's interrupt. The backstop outlasts a last call's
	// retransmissions (an INVITE or BYE unanswered is resent until Timer
	// B or F, 64*T1 = 32 s, before SIPp counts that call failed): at 20 s
	// it ended loaded 500 calls/s runs as a whole ("timed out after 32
	// s", exit 255) for one such call.
	res, err := sipp.Run(ctx, sipp.Options{Binary: cfg.SIPpBinary, Scenario: "register_invite_client.xml", Remote: cfg.SIPAddr,
		InjectionFile: inf, Calls: n, Rate: cfg.Rate, Limit: len(cfg.Callers), Duration: cfg.Talk, Dir: dir,
		Timeout: cfg.Duration + cfg.Ring + cfg.Talk + sippBackstop, TraceMessages: true, Extra: []string{"-message_file", msgs}})
	if err != nil {
		return nil, res, err
	}
	f, err := os.Open(msgs)
	if err != nil {
		return nil, res, fmt.Errorf("loadtest: e2e: sipp message trace: %w", err)
	}
	defer f.Close()
	recs, err := parseSIPpTrace(f, time.Local)
	for i := range recs {
		recs[i].callee = cfg.calleeOf(recs[i].callee) // a ring group's, a queue's number
	}
	return recs, res, err
}

// parseSIPpTrace reads SIPp's -trace_msg log: blocks that start with a
// "-----... 2026-11-30 10:39:26.826860" line, then "UDP message sent" or
// "... received", a blank line and the SIP message. A call is a Call-ID:
// the INVITE it sent (caller, callee, time), the 200 OK to its INVITE and
// its BYE.
func parseSIPpTrace(r io.Reader, loc *time.Location) ([]callRecord, error) {
	type block struct {
		at   time.Time
		sent bool
		msg  []string
	}
	byID := map[string]*callRecord{}
	var order []string
	handle := func(b *block) {
		if b == nil || len(b.msg) == 0 {
			return
		}
		var callID, cseq string
		for _, l := range b.msg[1:] {
			k, v, ok := strings.Cut(l, ":")
			if !ok {
				continue
			}
			switch strings.ToLower(strings.TrimSpace(k)) {
			case "call-id", "i":
				callID = strings.TrimSpace(v)
			case "cseq":
				cseq = strings.TrimSpace(v)
			}
		}
		if callID == "" {
			return
		}
		c := byID[callID]
		first := b.msg[0]
		switch {
		case b.sent && strings.HasPrefix(first, "INVITE "):
			if c == nil {
				c = &callRecord{callee: sipUser(strings.Fields(first)[1]), invite: b.at}
				for _, l := range b.msg[1:] {
					if k, v, ok := strings.Cut(l, ":"); ok && strings.EqualFold(strings.TrimSpace(k), "from") {
						if i := strings.Index(v, "sip:"); i >= 0 {
							c.caller = sipUser(v[i:])
						}
					}
				}
				byID[callID] = c
				order = append(order, callID)
			}
		case c != nil && !b.sent && strings.HasPrefix(first, "SIP/2.0 ") && strings.HasSuffix(cseq, "INVITE"):
			code := strings.Fields(first)[1]
			if code == "200" && c.ok.IsZero() {
				c.ok = b.at
			} else if code >= "300" && code != "401" && code != "407" && c.err == nil {
				c.err = fmt.Errorf("%w: %s", errRejected, strings.TrimPrefix(first, "SIP/2.0 "))
			}
		case c != nil && b.sent && strings.HasPrefix(first, "BYE "):
			c.end = b.at
		}
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var cur *block
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if strings.HasPrefix(line, "-----------------------------------------------") {
			handle(cur)
			ts := strings.TrimSpace(strings.TrimLeft(line, "-"))
			at, err := time.ParseInLocation("2006-01-02 15:04:05.000000", ts, loc)
			if err != nil {
				// SIPp also writes bare separator lines (seen under load):
				// a block without a time cannot be timed, so it is skipped.
				cur = nil
				continue
			}
			cur = &block{at: at}
			continue
		}
		if cur == nil {
			continue
		}
		if len(cur.msg) == 0 && strings.Contains(line, "message ") && (strings.Contains(line, "sent") || strings.Contains(line, "received")) {
			cur.sent = strings.Contains(line, "sent")
			continue
		}
		if len(cur.msg) == 0 && line == "" {
			continue
		}
		cur.msg = append(cur.msg, line)
	}
	handle(cur)
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("loadtest: sipp trace: %w", err)
	}
	recs := make([]callRecord, 0, len(order))
	for _, id := range order {
		c := byID[id]
		if c.ok.IsZero() && c.err == nil {
			c.err = errNotAnswered
		}
		recs = append(recs, *c)
	}
	return recs, nil
}

// sipUser is the user part of "sip:206@127.0.0.1:5060>".
func sipUser(uri string) string {
	uri = strings.TrimPrefix(strings.TrimSpace(uri), "<")
	uri = strings.TrimPrefix(uri, "sip:")
	if i := strings.IndexAny(uri, "@;>"); i >= 0 {
		uri = uri[:i]
	}
	return uri
}

var (
	errRejected    = kindError{"rejected", "call rejected"}
	errNotAnswered = kindError{"not_answered", "no final answer to the INVITE in the trace"}
)
