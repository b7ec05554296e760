package pbxsim

import (
	"strings"
	"testing"
)

func TestSDPAnswerVersioning(t *testing.T) {
	bob := "v=0\r\no=bob 77 100 IN IP4 127.0.0.2\r\ns=-\r\nc=IN IP4 127.0.0.2\r\nt=0 0\r\nm=audio 4000 RTP/AVP 0\r\na=sendrecv\r\n"
	hold := "v=0\r\no=alice 5 6 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 3000 RTP/AVP 0\r\na=sendonly\r\n"
	unhold := strings.Replace(hold, "sendonly", "sendrecv", 1)

	a1 := string(sdpAnswer([]byte(hold), []byte(bob), []byte(bob)))
	if !strings.Contains(a1, "o=bob 77 101 IN IP4 127.0.0.2\r\n") || !strings.Contains(a1, "a=recvonly\r\n") ||
		strings.Contains(a1, "sendrecv") || !strings.Contains(a1, "m=audio 4000 ") {
		t.Errorf("hold answer:\n%s", a1)
	}
	a2 := string(sdpAnswer([]byte(hold), []byte(bob), []byte(a1)))
	if a2 != a1 {
		t.Errorf("the same offer again must give the same answer, version kept:\n%s", a2)
	}
	a3 := string(sdpAnswer([]byte(unhold), []byte(bob), []byte(a2)))
	if !strings.Contains(a3, "o=bob 77 102 ") || !strings.Contains(a3, "a=sendrecv\r\n") {
		t.Errorf("unhold answer:\n%s", a3)
	}
	if sdpValid([]byte("garbage")) || !sdpValid([]byte(bob)) {
		t.Error("sdpValid")
	}
}
