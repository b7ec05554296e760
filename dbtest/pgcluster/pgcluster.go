package pgcluster

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
)

// ErrNoBinaries: initdb and pg_ctl are not installed.
var ErrNoBinaries = errors.New("pgcluster: no PostgreSQL binaries (initdb, pg_ctl): install the Debian package postgresql")

// Config configures a cluster. The zero value is usable.
type Config struct {
	// Prefix begins the name of the temporary directory. Default
	// "ctibridge-pg-".
	Prefix string
	// Settings are server settings passed as -c at every start, such as
	// "fsync=off". Default none.
	Settings []string
}

// Cluster is a throwaway PostgreSQL cluster in a temporary directory.
type Cluster struct {
	cfg  Config
	bin  string // directory of initdb, pg_ctl
	dir  string // parent: data/ and the socket live here
	port int
	as   string // user to run the binaries as ("" for the current one)
}

// Start initialises and starts a cluster from the newest
// /usr/lib/postgresql/*/bin (or PATH) in a new directory under TMPDIR,
// which the postgres user can reach whatever the work directory. As root
// it runs the binaries as the postgres user, since initdb refuses to run
// as root. On error nothing is left behind.
func Start(cfg Config) (_ *Cluster, err error) {
	if cfg.Prefix == "" {
		cfg.Prefix = "ctibridge-pg-"
	}
	bin, err := findBin()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", cfg.Prefix)
	if err != nil {
		return nil, err
	}
	c := &Cluster{cfg: cfg, bin: bin, dir: dir}
	defer func() {
		if err != nil {
			c.Remove()
		}
	}()
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, errors.New("pgcluster: running as root and there is no postgres user to run initdb as")
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chmod(dir, 0o755); err != nil {
			return nil, err
		}
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, err
		}
		c.as = "postgres"
	}
	if c.port, err = freePort(); err != nil {
		return nil, err
	}
	if out, err := c.run("initdb", "-D", c.data(), "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync"); err != nil {
		return nil, fmt.Errorf("pgcluster: initdb: %w\n%s", err, out)
	}
	if err := c.Start(); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Cluster) data() string { return filepath.Join(c.dir, "data") }

// DSN is the cluster's postgres database as the postgres superuser.
func (c *Cluster) DSN() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=2", c.port)
}

// Start starts (or restarts) the server and waits until it accepts
// connections.
func (c *Cluster) Start() error {
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1", c.port, c.dir)
	for _, s := range c.cfg.Settings {
		opts += " -c " + s
	}
	if out, err := c.run("pg_ctl", "-D", c.data(), "-o", opts, "-l", filepath.Join(c.dir, "log"), "-w", "-t", "30", "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(c.dir, "log"))
		return fmt.Errorf("pgcluster: pg_ctl start: %w\n%s\n%s", err, out, log)
	}
	return nil
}

// Stop stops the server (fast mode: connections are closed at once).
func (c *Cluster) Stop() error {
	if out, err := c.run("pg_ctl", "-D", c.data(), "-m", "fast", "-w", "stop"); err != nil {
		return fmt.Errorf("pgcluster: pg_ctl stop: %w\n%s", err, out)
	}
	return nil
}

// Remove deletes the cluster's directory; Stop it first.
func (c *Cluster) Remove() { os.RemoveAll(c.dir) }

func (c *Cluster) run(prog string, args ...string) ([]byte, error) {
	path := filepath.Join(c.bin, prog)
	cmd := exec.Command(path, args...)
	if c.as != "" {
		cmd = exec.Command("runuser", append([]string{"-u", c.as, "--", path}, args...)...)
	}
	cmd.Dir = c.dir
	return cmd.CombinedOutput()
}

// findBin returns the directory holding initdb and pg_ctl: the newest
// /usr/lib/postgresql/<version>/bin, else PATH's.
func findBin() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", ErrNoBinaries
}

func version(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
