package loadtest

import (
	"strings"
	"testing"
	"time"
)

const sippTrace = `----------------------------------------------- 2026-11-30 10:39:26.826860
UDP message sent (336 bytes):

REGISTER sip:127.0.0.1:15060 SIP/2.0
Call-ID: 1-25636@127.0.0.1
CSeq: 1 REGISTER


----------------------------------------------- 2026-11-30 10:39:26.828428
UDP message sent (487 bytes):

INVITE sip:206@127.0.0.1:15060 SIP/2.0
From: <sip:201@127.0.0.1>;tag=25636SIPpTag001
Call-ID: 1-25636@127.0.0.1
CSeq: 3 INVITE

----------------------------------------------- 2026-11-30 10:39:26.829000
UDP message sent (487 bytes):

INVITE sip:207@127.0.0.1:15060 SIP/2.0
From: <sip:202@127.0.0.1>;tag=x
Call-ID: 2-25636@127.0.0.1
CSeq: 3 INVITE

----------------------------------------------- 2026-11-30 10:39:26.931000
UDP message received [332] bytes :

SIP/2.0 180 Ringing
Call-ID: 1-25636@127.0.0.1
CSeq: 3 INVITE

----------------------------------------------- 2026-11-30 10:39:26.940500
UDP message received [332] bytes :

SIP/2.0 200 OK
Call-ID: 1-25636@127.0.0.1
CSeq: 3 INVITE

----------------------------------------------- 2026-11-30 10:39:26.950000
UDP message received [332] bytes :

SIP/2.0 486 Busy Here
Call-ID: 2-25636@127.0.0.1
CSeq: 3 INVITE

----------------------------------------------- 2026-11-30 10:39:27.950000
UDP message sent (200 bytes):

BYE sip:206@127.0.0.1:15060 SIP/2.0
Call-ID: 1-25636@127.0.0.1
CSeq: 10 BYE
`

func TestParseSIPpTrace(t *testing.T) {
	recs, err := parseSIPpTrace(strings.NewReader(sippTrace), time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 {
		t.Fatalf("%d calls: %+v", len(recs), recs)
	}
	a, b := recs[0], recs[1]
	if a.caller != "201" || a.callee != "206" || a.err != nil || a.ok.Sub(a.invite) != 112072*time.Microsecond || a.end.IsZero() {
		t.Errorf("first call %+v", a)
	}
	if b.caller != "202" || b.callee != "207" || !b.ok.IsZero() || callErrKind(b.err) != "rejected" {
		t.Errorf("second call %+v (kind %s)", b, callErrKind(b.err))
	}
}
