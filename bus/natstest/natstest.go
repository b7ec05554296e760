// Package natstest starts real nats-server processes with JetStream for
// tests (package natscluster): one server, or a cluster of three with
// routes on loopback, each storing in a temporary directory, each killed
// when the test ends. It never uses a server it did not start.
package natstest

import (
	"testing"

	"github.com/ctibridge/ctibridge/bus/natstest/natscluster"
)

// Binary is the nats-server the tests run (Debian's nats-server package).
const Binary = natscluster.Binary

// Server is one nats-server process.
type Server = natscluster.Server

// URLs joins the servers' client URLs, as --bus takes them.
func URLs(ss []*Server) string { return natscluster.URLs(ss) }

// Rejoin relaunches the killed servers down and waits until all are
// healthy (natscluster.Rejoin).
func Rejoin(all, down []*Server) error { return natscluster.Rejoin(all, down) }

// Need skips the test when nats-server is not installed.
func Need(t testing.TB) {
	t.Helper()
	if err := natscluster.Installed(); err != nil {
		t.Skip("nats-server not installed (scripts/test.sh installs it): ", err)
	}
}

// Start runs one JetStream server.
func Start(t testing.TB) *Server {
	t.Helper()
	return Cluster(t, 1)[0]
}

// StartConf runs one JetStream server with conf as its configuration
// file's text (nats-server's syntax, e.g. "max_payload: 65536").
func StartConf(t testing.TB, conf string) *Server {
	t.Helper()
	return cluster(t, 1, conf)[0]
}

// Cluster runs n JetStream servers routed to each other (one alone when
// n is 1).
func Cluster(t testing.TB, n int) []*Server {
	t.Helper()
	return cluster(t, n, "")
}

func cluster(t testing.TB, n int, conf string) []*Server {
	t.Helper()
	Need(t)
	ss, err := natscluster.StartConf(t.TempDir(), n, conf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, s := range ss {
			s.Kill()
		}
	})
	return ss
}
