// Package natstest starts real nats-server processes with JetStream for
// tests: one server, or a cluster of three with routes on loopback, each
// storing in a temporary directory, each killed when the test ends. It
// never uses a server it did not start.
package natstest

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Binary is the nats-server the tests run (Debian's nats-server package).
const Binary = "/usr/sbin/nats-server"

// Server is one nats-server process.
type Server struct {
	Name    string
	Port    int // client port on 127.0.0.1
	cluster int // route port, 0 without a cluster
	monitor int // HTTP monitoring port (/healthz)
	args    []string
	dir     string
	t       testing.TB

	mu   sync.Mutex
	cmd  *exec.Cmd
	logs *lockedBuf
}

// lockedBuf is the server's output, written by exec's copier while a test
// may read it.
type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// URL is the server's client URL.
func (s *Server) URL() string { return "nats://127.0.0.1:" + strconv.Itoa(s.Port) }

// URLs joins the servers' client URLs, as --bus takes them.
func URLs(ss []*Server) string {
	u := make([]string, len(ss))
	for i, s := range ss {
		u[i] = s.URL()
	}
	return strings.Join(u, ",")
}

// Need skips the test when nats-server is not installed.
func Need(t testing.TB) {
	t.Helper()
	if _, err := os.Stat(Binary); err != nil {
		t.Skip("nats-server not installed (scripts/test.sh installs it): ", err)
	}
}

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Start runs one JetStream server.
func Start(t testing.TB) *Server { return StartConf(t, "") }

// StartConf runs one JetStream server with conf as its configuration
// file's text (nats-server's syntax, e.g. "max_payload: 65536"); the
// command line gives the ports and the store.
func StartConf(t testing.TB, conf string) *Server {
	Need(t)
	for try := 1; ; try++ {
		s := &Server{Name: "n1", Port: freePort(t), monitor: freePort(t), dir: t.TempDir(), t: t}
		s.args = []string{"-a", "127.0.0.1", "-p", strconv.Itoa(s.Port), "-m", strconv.Itoa(s.monitor), "-js", "-sd", s.dir, "-n", s.Name}
		if conf != "" {
			f := filepath.Join(t.TempDir(), "nats.conf")
			if err := os.WriteFile(f, []byte(conf+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			s.args = append(s.args, "-c", f)
		}
		s.start()
		if s.waitPort(try < portTries) {
			return s
		}
		s.Kill()
	}
}

// portTries bounds the attempts at starting servers on ports picked free
// a moment before: another test of the run may bind one meanwhile
// ("address already in use"), and then every port is picked again.
const portTries = 3

// Cluster runs n JetStream servers routed to each other.
func Cluster(t testing.TB, n int) []*Server {
	Need(t)
	for try := 1; ; try++ {
		if ss := startCluster(t, n, try < portTries); ss != nil {
			return ss
		}
	}
}

// startCluster starts a cluster on fresh ports; nil when a port was taken
// meanwhile and retry allows another attempt.
func startCluster(t testing.TB, n int, retry bool) []*Server {
	ss := make([]*Server, n)
	for i := range ss {
		ss[i] = &Server{Name: "n" + strconv.Itoa(i+1), Port: freePort(t), cluster: freePort(t), monitor: freePort(t), dir: t.TempDir(), t: t}
	}
	var routes []string
	for _, s := range ss {
		routes = append(routes, "nats://127.0.0.1:"+strconv.Itoa(s.cluster))
	}
	for _, s := range ss {
		s.args = []string{"-a", "127.0.0.1", "-p", strconv.Itoa(s.Port), "-m", strconv.Itoa(s.monitor), "-js", "-sd", s.dir, "-n", s.Name,
			"--cluster_name", "ctibridge-test", "--cluster", "nats://127.0.0.1:" + strconv.Itoa(s.cluster),
			"--routes", strings.Join(routes, ",")}
		s.start()
	}
	for _, s := range ss {
		if !s.waitPort(retry) {
			for _, s := range ss {
				s.Kill()
			}
			return nil
		}
	}
	return ss
}

func (s *Server) start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	cmd := exec.Command(Binary, s.args...)
	s.logs = &lockedBuf{}
	cmd.Stdout, cmd.Stderr = s.logs, s.logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.cmd = cmd
	s.t.Cleanup(func() { s.Kill() })
}

// waitPort waits until the server answers /healthz (JetStream included:
// in a cluster, once its meta group has a leader and it is current). When
// retry is set and the server could not bind a port it was given, it
// returns false at once instead of failing the test.
func (s *Server) waitPort(retry bool) bool {
	url := "http://127.0.0.1:" + strconv.Itoa(s.monitor) + "/healthz"
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return true
			}
		}
		if retry && strings.Contains(s.Logs(), "address already in use") {
			s.t.Logf("nats-server %s: a port was taken meanwhile, starting again on others", s.Name)
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.t.Fatalf("nats-server %s not healthy: %s", s.Name, s.Logs())
	return false
}

// Kill ends the server with SIGKILL (no goodbye to the cluster) and waits
// for it; killing a dead server does nothing.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Kill()
	s.cmd.Wait()
	s.cmd = nil
}

// Restart starts a killed server again on the same ports and store.
func (s *Server) Restart() {
	s.start()
	s.waitPort(false)
}

// Logs is what the server printed.
func (s *Server) Logs() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logs.String()
}

// Dir is the server's JetStream store directory.
func (s *Server) Dir() string { return filepath.Clean(s.dir) }

// String names the server in test logs.
func (s *Server) String() string { return fmt.Sprintf("%s(%d)", s.Name, s.Port) }
