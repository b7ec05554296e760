package natscluster

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Binary is the nats-server run (Debian's nats-server package).
const Binary = "/usr/sbin/nats-server"

// ErrNoBinary: nats-server is not installed.
var ErrNoBinary = errors.New("natscluster: " + Binary + " not installed (Debian package nats-server)")

// Server is one nats-server process.
type Server struct {
	Name    string
	Port    int // client port on 127.0.0.1
	cluster int // route port, 0 without a cluster
	monitor int // HTTP monitoring port (/healthz)
	args    []string
	dir     string

	mu   sync.Mutex
	cmd  *exec.Cmd
	logs *lockedBuf
}

// lockedBuf is the server's output, written by exec's copier while a
// caller may read it.
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

// Installed says why nats-server cannot run, or nil.
func Installed() error {
	if _, err := os.Stat(Binary); err != nil {
		return fmt.Errorf("%w: %v", ErrNoBinary, err)
	}
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// portTries bounds the attempts at starting servers on ports picked free
// a moment before: another process may bind one meanwhile ("address
// already in use"), and then every port is picked again.
const portTries = 3

// errPortTaken: a server could not bind a port it was given.
var errPortTaken = errors.New("natscluster: a port was taken meanwhile")

// Start runs n JetStream servers, each storing under dir/<name>: one
// alone when n is 1, else a cluster routed to each other. It returns once
// every server answers /healthz (in a cluster: its meta group has a leader
// and it is current). On an error no server is left running; the caller
// Kills the servers when done.
func Start(dir string, n int) ([]*Server, error) { return StartConf(dir, n, "") }

// StartConf is Start with conf, when not empty, as every server's
// configuration file's text (nats-server's syntax, e.g. "max_payload:
// 65536"); the command line still gives the ports and the store.
func StartConf(dir string, n int, conf string) ([]*Server, error) {
	if err := Installed(); err != nil {
		return nil, err
	}
	if n < 1 {
		return nil, fmt.Errorf("natscluster: %d servers", n)
	}
	for try := 1; ; try++ {
		ss, err := start(dir, n, conf)
		if err == nil {
			return ss, nil
		}
		if !errors.Is(err, errPortTaken) || try == portTries {
			return nil, err
		}
	}
}

// start starts the servers on fresh ports.
func start(dir string, n int, conf string) ([]*Server, error) {
	ss := make([]*Server, n)
	for i := range ss {
		s := &Server{Name: "n" + strconv.Itoa(i+1), dir: filepath.Join(dir, "n"+strconv.Itoa(i+1))}
		ports := []*int{&s.Port, &s.monitor}
		if n > 1 {
			ports = append(ports, &s.cluster)
		}
		for _, p := range ports {
			v, err := freePort()
			if err != nil {
				return nil, err
			}
			*p = v
		}
		if err := os.MkdirAll(s.dir, 0o755); err != nil {
			return nil, err
		}
		ss[i] = s
	}
	var routes []string
	for _, s := range ss {
		routes = append(routes, "nats://127.0.0.1:"+strconv.Itoa(s.cluster))
	}
	var confFile string
	if conf != "" {
		confFile = filepath.Join(dir, "nats.conf")
		if err := os.WriteFile(confFile, []byte(conf+"\n"), 0o600); err != nil {
			return nil, err
		}
	}
	for _, s := range ss {
		s.args = []string{"-a", "127.0.0.1", "-p", strconv.Itoa(s.Port), "-m", strconv.Itoa(s.monitor), "-js", "-sd", s.dir, "-n", s.Name}
		if confFile != "" {
			s.args = append(s.args, "-c", confFile)
		}
		if n > 1 {
			s.args = append(s.args, "--cluster_name", "ctibridge-test", "--cluster", "nats://127.0.0.1:"+strconv.Itoa(s.cluster),
				"--routes", strings.Join(routes, ","))
		}
	}
	kill := func() {
		for _, s := range ss {
			s.Kill()
		}
	}
	for _, s := range ss {
		if err := s.start(); err != nil {
			kill()
			return nil, err
		}
	}
	for _, s := range ss {
		if err := s.waitHealthy(); err != nil {
			kill()
			return nil, err
		}
	}
	return ss, nil
}

func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cmd := exec.Command(Binary, s.args...)
	s.logs = &lockedBuf{}
	cmd.Stdout, cmd.Stderr = s.logs, s.logs
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("natscluster: %s: %w", s.Name, err)
	}
	s.cmd = cmd
	return nil
}

// waitHealthy waits until the server answers /healthz (JetStream
// included), for at most 30 s; errPortTaken when it could not bind a
// port it was given.
func (s *Server) waitHealthy() error {
	url := "http://127.0.0.1:" + strconv.Itoa(s.monitor) + "/healthz"
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if strings.Contains(s.Logs(), "address already in use") {
			return fmt.Errorf("%w (%s)", errPortTaken, s.Name)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("natscluster: nats-server %s not healthy after 30 s: %s", s.Name, s.Logs())
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

// Restart starts a killed server again on the same ports and store and
// waits until it is healthy.
func (s *Server) Restart() error {
	if err := s.start(); err != nil {
		return err
	}
	return s.waitHealthy()
}

// Relaunch starts a killed server again on the same ports and store
// without waiting: a lone server of a cluster is not healthy until
// another joins it. WaitHealthy waits then.
func (s *Server) Relaunch() error { return s.start() }

// WaitHealthy waits until the server answers /healthz, 30 s at most.
func (s *Server) WaitHealthy() error { return s.waitHealthy() }

// Rejoin relaunches the killed servers down, then waits until every
// server of all is healthy: a cluster whole again after an outage.
func Rejoin(all, down []*Server) error {
	for _, s := range down {
		if err := s.Relaunch(); err != nil {
			return err
		}
	}
	for _, s := range all {
		if err := s.WaitHealthy(); err != nil {
			return err
		}
	}
	return nil
}

// Logs is what the server printed.
func (s *Server) Logs() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.logs == nil {
		return ""
	}
	return s.logs.String()
}

// Dir is the server's JetStream store directory.
func (s *Server) Dir() string { return filepath.Clean(s.dir) }

// String names the server in logs.
func (s *Server) String() string { return fmt.Sprintf("%s(%d)", s.Name, s.Port) }
