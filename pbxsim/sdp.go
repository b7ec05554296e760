package pbxsim

import (
	"bytes"
	"fmt"
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
