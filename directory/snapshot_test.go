package directory

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/auth"
)

// TestDirectoryDownAtStart: serve restarted while slapd is down knows the
// LDAP users from the snapshot of the last read: their logins answer
// ErrDirectoryUnavailable (503), never a wrong password, their stored
// sessions go on, and a name the directory never had is still a wrong
// password. Back up, Run reads it within its retry: alice logs in within
// 5 s.
func TestDirectoryDownAtStart(t *testing.T) {
	s := startSlapd(t, seedLDIF)
	dir := t.TempDir()
	sessions := auth.NewFileSessions(filepath.Join(dir, "sessions.json"))
	clk := &testClock{t: time.Now()}

	// First run: slapd up, alice logs in.
	svc1 := auth.NewService(nil, auth.Config{Store: sessions})
	set1 := New(svc1, nil, []Source{newLDAP(t, s, s.ldapsURL, false, clk)}, Config{SnapshotDir: dir})
	if err := set1.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	alice, err := svc1.Login("alice", "alice-pw", "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "directory-ldap.json")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("snapshot: %v, %v", fi, err)
	}

	// Restart with slapd down.
	s.stop()
	svc := auth.NewService(nil, auth.Config{Store: sessions})
	set := New(svc, nil, []Source{newLDAP(t, s, s.ldapsURL, false, clk)}, Config{SnapshotDir: dir, Retry: 200 * time.Millisecond})
	if err := set.Refresh(context.Background()); err == nil {
		t.Fatal("refresh with slapd down: no error")
	}
	if _, err := svc.LoadSessions(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := set.Status(); len(st) != 1 || st[0].Users != 3 || !st[0].Snapshot {
		t.Fatalf("status %+v", st)
	}
	for _, name := range []string{"alice", "bob"} {
		if _, err := svc.Login(name, name+"-pw", "192.0.2.1"); !errors.Is(err, auth.ErrDirectoryUnavailable) {
			t.Errorf("%s, directory down at start: %v, want ErrDirectoryUnavailable", name, err)
		}
	}
	if _, err := svc.Login("nobody", "x", "192.0.2.1"); !errors.Is(err, auth.ErrBadCredentials) {
		t.Errorf("a name the directory never had: %v", err)
	}
	if u, _, err := svc.Authenticate(alice.Token); err != nil || !slices.Equal(u.Scope(), []string{"201"}) {
		t.Errorf("alice's session, directory down at start: %v, %v", u, err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go set.Run(ctx)
	s.start(t)
	back := time.Now()
	for {
		_, err := svc.Login("alice", "alice-pw", "192.0.2.1")
		if err == nil {
			break
		}
		if time.Since(back) > 5*time.Second {
			t.Fatalf("alice not logged in 5 s after the directory came back: %v", err)
		}
		time.Sleep(300 * time.Millisecond) // a person retrying; 50 ms spends the address's attempts
	}
	t.Logf("alice logged in %v after slapd was back", time.Since(back))
}
