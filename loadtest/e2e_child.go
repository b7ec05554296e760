package loadtest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// An e2e run measures the bridge best with the bridge and its PBX in
// processes of their own, apart from the screens and the calls' driver
// (whose CPU and GC would otherwise be the bridge's): the parent starts
// its own binary as a child (`ctibridge-lab loadtest e2e-bridge`), which
// starts pbxsim and a `ctibridge serve` process (StartBridge), writes an E2EBridge as one JSON line on its
// standard output, then answers each "channels" line read on its
// standard input with pbxsim's live channels (a JSON array on one line),
// the truth the ghost count needs, until its input ends.

// E2EBridge is what a child bridge process tells its parent.
type E2EBridge struct {
	SIP   string   `json:"sip"`   // the PBX's SIP address
	HTTP  string   `json:"http"`  // the bridge's REST root
	Admin string   `json:"admin"` // its admin listener (for --profile)
	Token string   `json:"token"` // an admin's token
	Exts  []string `json:"exts"`  // the PBX's extensions, callers then callees
	// Dial and Devices are E2EConfig's: the numbers that reach some
	// callees (a ring group, a queue) and the callees' second devices.
	Dial    map[string]string `json:"dial,omitempty"`
	Devices []string          `json:"devices,omitempty"`
	// BridgePID is the bridge's process (a ctibridge serve the child
	// started), for its CPU.
	BridgePID int `json:"bridge_pid"`
}

// ServeE2EBridge is the child's side: it writes b, then answers
// "channels" requests from in with channels() until in ends or ctx does.
func ServeE2EBridge(ctx context.Context, b E2EBridge, channels func() []string, in io.Reader, out io.Writer) error {
	line, err := json.Marshal(b)
	if err != nil {
		return err
	}
	if _, err := out.Write(append(line, '\n')); err != nil {
		return err
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(in)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case l, ok := <-lines:
			if !ok {
				return nil
			}
			if l != "channels" {
				return fmt.Errorf("loadtest: e2e bridge: unknown request %q (want channels)", trunc([]byte(l)))
			}
			chans := channels()
			if chans == nil {
				chans = []string{}
			}
			b, _ := json.Marshal(chans)
			if _, err := out.Write(append(b, '\n')); err != nil {
				return err
			}
		}
	}
}

// E2EChild is a PBX running as a child process, with its bridge process.
type E2EChild struct {
	E2EBridge
	PID int

	cmd     *exec.Cmd
	mu      sync.Mutex // one request at a time; guards the rest
	in      io.WriteCloser
	out     *bufio.Reader
	stopped bool
	err     error // how it exited, once stopped
}

// StartE2EChild runs bin with args (a `ctibridge-lab loadtest e2e-bridge`,
// its standard error going to stderr) and waits up to 60 s for what it
// started.
func StartE2EChild(ctx context.Context, bin string, args []string, stderr io.Writer) (*E2EChild, error) {
	cmd := exec.Command(bin, args...)
	cmd.Stderr = stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("loadtest: e2e: start the bridge process: %w", err)
	}
	c := &E2EChild{PID: cmd.Process.Pid, cmd: cmd, in: in, out: bufio.NewReaderSize(outPipe, 64<<10)}
	first := make(chan error, 1)
	go func() {
		line, err := c.out.ReadBytes('\n')
		if err == nil {
			if err = json.Unmarshal(line, &c.E2EBridge); err != nil {
				err = fmt.Errorf("its first line %q: %w", trunc(line), err)
			}
		}
		first <- err
	}()
	timeout := time.NewTimer(60 * time.Second)
	defer timeout.Stop()
	read := false
	select {
	case err = <-first:
		read = true
	case <-timeout.C:
		err = errors.New("nothing said in 60 s")
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		cmd.Process.Kill()
		if !read {
			<-first // its output closed: nothing reads c.out any more
		}
		c.Stop()
		return nil, fmt.Errorf("loadtest: e2e: the bridge process (%s %s): %w", bin, strings.Join(args, " "), err)
	}
	return c, nil
}

// Channels asks the child for the PBX's live channels; nil when it does
// not answer (it has exited).
func (c *E2EChild) Channels() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return nil
	}
	if _, err := io.WriteString(c.in, "channels\n"); err != nil {
		return nil
	}
	line, err := c.out.ReadBytes('\n')
	if err != nil {
		return nil
	}
	var chans []string
	if json.Unmarshal(line, &chans) != nil {
		return nil
	}
	return chans
}

// Stop ends the child: its input closed, it stops; killed after 15 s.
// It returns how the child exited (nil for a clean stop). Channels
// answers nil after it.
func (c *E2EChild) Stop() error {
	c.mu.Lock() // no request in flight, none after
	defer c.mu.Unlock()
	if c.stopped {
		return c.err
	}
	c.stopped = true
	c.in.Close()
	go io.Copy(io.Discard, c.out) // what it still writes, so that it never blocks
	done := make(chan struct{})
	go func() {
		c.err = c.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		c.cmd.Process.Kill()
		<-done
		c.err = errors.New("loadtest: e2e: the bridge process did not stop in 15 s: killed")
	}
	return c.err
}

// procCPU is the CPU (user and system) process pid has used, -1 when
// unknown (no pid, not Linux).
func procCPU(pid int) time.Duration {
	if pid <= 0 {
		return -1
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return -1
	}
	// After the command name (in parentheses, which may hold spaces):
	// state is field 3, utime 14 and stime 15, in clock ticks (100 a
	// second on Linux).
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return -1
	}
	u, err1 := strconv.ParseUint(f[11], 10, 64)
	s, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return -1
	}
	return time.Duration(u+s) * 10 * time.Millisecond
}
