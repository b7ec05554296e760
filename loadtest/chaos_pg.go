package loadtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/jackc/pgx/v5"
)

// pgCluster is a throwaway PostgreSQL cluster the db scenario starts and
// stops itself, never the machine's shared server. It is dbtest.Cluster's
// twin: dbtest imports testing and is for tests only, and this runs in
// the ctibridge binary.
type pgCluster struct {
	bin  string // directory of initdb and pg_ctl
	dir  string
	port int
	as   string // user the binaries run as ("" for the current one)
}

// startPG initialises a cluster in a new temporary directory (under
// TMPDIR, which the postgres user can reach whatever the work directory)
// from the newest /usr/lib/postgresql/*/bin (or PATH) and starts it. As
// root it runs the binaries as the postgres user, since initdb refuses
// root. remove deletes the directory; stop the server first.
func startPG() (_ *pgCluster, err error) {
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	sort.Strings(bins)
	if p, err := exec.LookPath("initdb"); err == nil {
		bins = append([]string{p}, bins...)
	}
	if len(bins) == 0 {
		return nil, errors.New("no PostgreSQL binaries (initdb, pg_ctl): install the Debian package postgresql")
	}
	dir, err := os.MkdirTemp("", "ctibridge-chaos-pg-")
	if err != nil {
		return nil, err
	}
	c := &pgCluster{bin: filepath.Dir(bins[len(bins)-1]), dir: dir}
	defer func() {
		if err != nil {
			c.remove()
		}
	}()
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, errors.New("running as root and there is no postgres user to run initdb as")
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
	addr, err := freeTCPAddr()
	if err != nil {
		return nil, err
	}
	_, port, _ := net.SplitHostPort(addr)
	c.port, _ = strconv.Atoi(port)
	if out, err := c.run("initdb", "-D", c.data(), "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync"); err != nil {
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	return c, c.start()
}

func (c *pgCluster) remove() { os.RemoveAll(c.dir) }

func (c *pgCluster) data() string { return filepath.Join(c.dir, "data") }

func (c *pgCluster) dsn() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=2", c.port)
}

// start starts the server and waits until it accepts connections.
func (c *pgCluster) start() error {
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1", c.port, c.dir)
	if out, err := c.run("pg_ctl", "-D", c.data(), "-o", opts, "-l", filepath.Join(c.dir, "log"), "-w", "-t", "30", "start"); err != nil {
		return fmt.Errorf("pg_ctl start: %w\n%s", err, out)
	}
	return nil
}

// stop stops the server in fast mode (connections are closed at once).
func (c *pgCluster) stop() error {
	if out, err := c.run("pg_ctl", "-D", c.data(), "-m", "fast", "-w", "stop"); err != nil {
		return fmt.Errorf("pg_ctl stop: %w\n%s", err, out)
	}
	return nil
}

func (c *pgCluster) run(prog string, args ...string) ([]byte, error) {
	path := filepath.Join(c.bin, prog)
	cmd := exec.Command(path, args...)
	if c.as != "" {
		cmd = exec.Command("runuser", append([]string{"-u", c.as, "--", path}, args...)...)
	}
	cmd.Dir = c.dir
	return cmd.CombinedOutput()
}

// cdrRows counts the rows of the cdr table by uniqueid.
func (c *pgCluster) cdrRows(ctx context.Context) (map[string]int, error) {
	conn, err := pgx.Connect(ctx, c.dsn())
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "SELECT uniqueid, count(*) FROM cdr GROUP BY uniqueid")
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			return nil, err
		}
		out[id] = n
	}
	return out, rows.Err()
}
