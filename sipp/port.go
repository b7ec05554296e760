package sipp

import (
	"fmt"
	"net"
)

// FreePort returns a loopback port free for both UDP and TCP at the time
// of the call (sipp binds both with -t t1).
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
		if port+10000 > 65000 {
			continue // keep room for the default media port
		}
		return port, nil
	}
	return 0, fmt.Errorf("sipp: no free port")
}
