package history

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/dbtest"
)

// Environment of the crash child (TestCrashChild run by TestCrashLosesNoCDR).
const (
	crashEnvDSN   = "CTIBRIDGE_CRASH_DSN"
	crashEnvSpool = "CTIBRIDGE_CRASH_SPOOL"
	crashEnvBase  = "CTIBRIDGE_CRASH_BASE"
	crashEnvSlow  = "CTIBRIDGE_CRASH_SLOW"
)

// slowStore delays every write, so that the spool holds a backlog when
// the process is killed.
type slowStore struct {
	Store
	d time.Duration
}

func (s slowStore) Insert(ctx context.Context, cdrs []CDR) error {
	time.Sleep(s.d)
	return s.Store.Insert(ctx, cdrs)
}

// TestCrashChild is the process TestCrashLosesNoCDR kills: a Recorder on
// PostgreSQL fed real Cdr events (each its own UniqueID) without pause,
// printing "ack <uniqueid>" for every CDR once it is fsynced. It runs
// until it is killed.
func TestCrashChild(t *testing.T) {
	dsn := os.Getenv(crashEnvDSN)
	if dsn == "" {
		t.Skip("run by TestCrashLosesNoCDR")
	}
	base, _ := strconv.Atoi(os.Getenv(crashEnvBase))
	var s Store = NewPostgres(openPostgres(t, dsn), Config{})
	if os.Getenv(crashEnvSlow) != "" {
		s = slowStore{s, 30 * time.Millisecond}
	}
	rec, err := NewRecorder(s, RecorderConfig{SpoolDir: os.Getenv(crashEnvSpool), Location: time.UTC})
	if err != nil {
		t.Fatal(err)
	}
	out := bufio.NewWriter(os.Stdout)
	rec.afterSync = func(cdrs []CDR) {
		for _, c := range cdrs {
			out.WriteString("ack " + c.UniqueID + "\n")
		}
		out.Flush() // one write per group
	}
	go rec.Run(context.Background())
	m := recordedCdr(t)
	fmt.Println("started")
	for i := base; ; i++ {
		rec.Observe(m.Set("UniqueID", "1796028439."+strconv.Itoa(i)))
		if i%20 == 0 {
			time.Sleep(time.Millisecond) // a busy PBX: about 10,000 CDRs/s
		}
	}
}

// TestCrashLosesNoCDR kills a recording process with SIGKILL at random
// instants, several times, each restart resuming the spool the last one
// left, then drains it: every CDR the killed processes had acknowledged
// (fsynced) is in the database, exactly once.
func TestCrashLosesNoCDR(t *testing.T) {
	dsn := dbtest.Postgres(t)
	db := NewPostgres(openPostgres(t, dsn), Config{})
	spool := t.TempDir()
	acked := map[string]bool{}
	rounds := 6
	if testing.Short() {
		rounds = 3
	}
	var pendingAtRestart []int64
	for round := range rounds {
		if round > 0 {
			// What the last kill left in the spool, for the log.
			sp, err := openSpool(spool, 1<<30, defaultSegMax)
			if err != nil {
				t.Fatal(err)
			}
			_, n := sp.Stats()
			sp.Close()
			pendingAtRestart = append(pendingAtRestart, n)
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashEnvDSN+"="+dsn, crashEnvSpool+"="+spool, crashEnvBase+"="+strconv.Itoa(round*10_000_000))
		if round%2 == 1 {
			cmd.Env = append(cmd.Env, crashEnvSlow+"=1")
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var got []string
		started := make(chan struct{})
		readDone := make(chan struct{})
		go func() {
			defer close(readDone)
			br := bufio.NewReader(stdout)
			for {
				// A line the kill cut short (no newline) is no ack.
				line, err := br.ReadString('\n')
				if err != nil {
					return
				}
				line = strings.TrimSuffix(line, "\n")
				if line == "started" {
					close(started)
					continue
				}
				if id, ok := strings.CutPrefix(line, "ack "); ok {
					mu.Lock()
					got = append(got, id)
					mu.Unlock()
				}
			}
		}()
		select {
		case <-started:
		case <-time.After(60 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("child did not start: %s", stderr.String())
		}
		time.Sleep(time.Duration(50+rand.IntN(400)) * time.Millisecond)
		cmd.Process.Signal(syscall.SIGKILL)
		err = cmd.Wait()
		<-readDone
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
			t.Fatalf("child was not killed (%v): %s", err, stderr.String())
		}
		mu.Lock()
		for _, id := range got {
			acked[id] = true
		}
		t.Logf("round %d: %d CDRs acknowledged before SIGKILL", round, len(got))
		mu.Unlock()
	}
	t.Logf("CDRs left in the spool at each restart: %v", pendingAtRestart)

	// The last restart: drain what the last kill left.
	rec, stop := startRecorder(t, db, spool, 0)
	dbtest.WaitFor(t, "the spool to drain", func() bool { st := rec.Stats(); return st.Pending == 0 && !st.StoreDown })
	stop()

	rs, done, err := db.c.Query(context.Background(), `SELECT uniqueid, count(*) FROM cdr GROUP BY uniqueid`)
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]int{}
	for rs.Next() {
		var id string
		var n int
		if err := rs.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		stored[id] = n
	}
	done()
	missing, doubled := 0, 0
	for id, n := range stored {
		if n != 1 {
			doubled++
			t.Errorf("%s stored %d times", id, n)
		}
	}
	for id := range acked {
		if stored[id] == 0 {
			missing++
			if missing <= 5 {
				t.Errorf("acknowledged CDR %s is not in the database", id)
			}
		}
	}
	t.Logf("%d rounds: %d CDRs acknowledged, %d stored (the rest were synced but killed before their ack was printed), %d missing, %d doubled",
		rounds, len(acked), len(stored), missing, doubled)
	if len(acked) == 0 {
		t.Fatal("nothing was acknowledged: the test proves nothing")
	}
}
