package sipp

import (
	"fmt"
	"net"
)

// FreePort returns a loopback port free for both UDP and TCP at the time
// of the call (sipp binds both with -t t1), whose default media ports
// (port+10000 and the three above, sipp's audio and video RTP and RTCP)
// are free too: sipp exits 254 when it cannot bind them.
func FreePort() (int, error) {
	for i := 0; i < 50; i++ {
		u, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("sipp: free port: %w", err)
		}
		port := u.LocalAddr().(*net.UDPAddr).Port
		t, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		u.Close()
		if err != nil {
			continue
		}
		t.Close()
		if port+10000+3 > 65000 || !udpFree(port+10000, 4) {
			continue // keep room for the default media ports
		}
		return port, nil
	}
	return 0, fmt.Errorf("sipp: no free port")
}

// udpFree says whether the n loopback UDP ports from first are free now.
func udpFree(first, n int) bool {
	for p := first; p < first+n; p++ {
		c, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			return false
		}
		c.Close()
	}
	return true
}
