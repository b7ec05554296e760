package pbxsim

import (
	"bytes"
	"fmt"
	"strconv"
)

// sdpOffer is the session description pbxsim offers or answers when it is
// the media end itself (auto-answer, Originate). No RTP is ever sent.
func (p *PBX) sdp(id uint64, hold bool) []byte {
	host, _ := p.sipHostPort()
	dir := "sendrecv"
	if hold {
		dir = "recvonly"
	}
	port := 10000 + 2*(id%20000)
	return fmt.Appendf(nil, "v=0\r\no=- %d %d IN IP4 %s\r\ns=Asterisk\r\nc=IN IP4 %s\r\nt=0 0\r\n"+
		"m=audio %d RTP/AVP 0 8 101\r\na=rtpmap:0 PCMU/8000\r\na=rtpmap:8 PCMA/8000\r\n"+
		"a=rtpmap:101 telephone-event/8000\r\na=fmtp:101 0-16\r\na=ptime:20\r\na=%s\r\n",
		id, id, host, host, port, dir)
}

// sdpHold reports whether an offer puts the call on hold (RFC 3264 §8.4:
// sendonly or inactive, or the old c=0.0.0.0 form).
func sdpHold(body []byte) bool {
	return bytes.Contains(body, []byte("a=sendonly")) || bytes.Contains(body, []byte("a=inactive")) ||
		bytes.Contains(body, []byte("c=IN IP4 0.0.0.0"))
}

// sdpValid reports whether body looks like a session description: a v=
// line, an o= line and at least one m= line.
func sdpValid(body []byte) bool {
	var v, o, m bool
	for line := range bytes.Lines(body) {
		switch {
		case bytes.HasPrefix(line, []byte("v=")):
			v = true
		case bytes.HasPrefix(line, []byte("o=")):
			o = len(bytes.Fields(line)) == 6
		case bytes.HasPrefix(line, []byte("m=")):
			m = true
		}
	}
	return v && o && m
}

// sdpDirection is the media direction an SDP states (sendrecv when none).
func sdpDirection(body []byte) string {
	dir := "sendrecv"
	for line := range bytes.Lines(body) {
		switch d := string(bytes.TrimSpace(line)); d {
		case "a=sendonly", "a=recvonly", "a=inactive", "a=sendrecv":
			dir = d[2:]
		}
	}
	if bytes.Contains(body, []byte("c=IN IP4 0.0.0.0")) {
		dir = "inactive"
	}
	return dir
}

// sdpAnswer answers offer with base (the description of the media end the
// offerer talks to): base's media in the direction answering the offer's
// (RFC 3264 §6.1), with prev's origin line, whose version goes up by one
// when the description differs from prev (RFC 3264 §8). prev may be empty:
// then base's origin stays.
func sdpAnswer(offer, base, prev []byte) []byte {
	dir := "sendrecv"
	switch sdpDirection(offer) {
	case "sendonly":
		dir = "recvonly"
	case "recvonly":
		dir = "sendonly"
	case "inactive":
		dir = "inactive"
	}
	var out []byte
	dirDone := false
	for line := range bytes.Lines(base) {
		t := bytes.TrimSpace(line)
		switch string(t) {
		case "a=sendonly", "a=recvonly", "a=inactive", "a=sendrecv":
			continue
		}
		if bytes.HasPrefix(t, []byte("m=")) && !dirDone {
			out = append(out, "a="+dir+"\r\n"...)
			dirDone = true
		}
		out = append(out, t...)
		out = append(out, "\r\n"...)
	}
	origin := func(b []byte) (line []byte, rest []byte) {
		for l := range bytes.Lines(b) {
			if bytes.HasPrefix(l, []byte("o=")) {
				return bytes.TrimSpace(l), bytes.Replace(b, l, nil, 1)
			}
		}
		return nil, b
	}
	prevO, prevRest := origin(prev)
	newO, newRest := origin(out)
	f := bytes.Fields(prevO)
	if len(f) != 6 || newO == nil {
		return out
	}
	if !bytes.Equal(normalizeSDP(prevRest), normalizeSDP(newRest)) {
		v, err := strconv.ParseUint(string(f[2]), 10, 64)
		if err != nil {
			return out
		}
		f[2] = strconv.AppendUint(nil, v+1, 10)
	}
	return bytes.Replace(out, newO, bytes.Join(f, []byte(" ")), 1)
}

// normalizeSDP is body with CRLF line ends, for comparing descriptions.
func normalizeSDP(body []byte) []byte {
	var out []byte
	for line := range bytes.Lines(body) {
		out = append(out, bytes.TrimSpace(line)...)
		out = append(out, "\r\n"...)
	}
	return out
}
