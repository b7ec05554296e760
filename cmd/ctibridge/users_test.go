package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctibridge/ctibridge/auth"
)

// TestUsersImportAndList: a CSV's users are added to a users file (new,
// then existing, keeping its profiles and users); a bad CSV is reported
// row by row and writes nothing; `users list` shows the result.
func TestUsersImportAndList(t *testing.T) {
	dir := t.TempDir()
	usersPath := filepath.Join(dir, "users.yaml")
	h, _ := auth.HashPassword("root-pw", 4)
	os.WriteFile(usersPath, []byte("# our users\nprofiles:\n  desk: [call, see_numbers]\nusers:\n  - username: root\n    password_hash: \""+h+"\"\n    role: admin\n"), 0o640)
	csvPath := filepath.Join(dir, "people.csv")
	os.WriteFile(csvPath, []byte("username,name,password,profile,endpoints,groups\n"+
		"anna,Anna Neri,anna-pw,desk,201;211,reception\n"+
		"beppe,\"Verdi, Beppe\",beppe-pw,,202,\n"), 0o600)
	run1 := func(args ...string) (string, error) {
		var out, errb bytes.Buffer
		err := run(context.Background(), args, sysIO{func(string) string { return "" }, nil, &out, &errb})
		return out.String() + errb.String(), err
	}
	if out, err := run1("users", "import", csvPath, "--users", usersPath); err != nil || !strings.Contains(out, "imported 2 users") {
		t.Fatalf("import: %v\n%s", err, out)
	}
	us, err := auth.LoadUsers(usersPath)
	if err != nil {
		t.Fatal(err)
	}
	anna, _ := us.Lookup("anna")
	if us.Len() != 3 || anna == nil || anna.Profile != "desk" || strings.Join(anna.Endpoints, ",") != "201,211" {
		t.Fatalf("after import: %d users, anna %+v", us.Len(), anna)
	}
	s := auth.NewService(us, auth.Config{})
	if _, err := s.Login("beppe", "beppe-pw", "192.0.2.1"); err != nil {
		t.Errorf("beppe logs in with the CSV's password: %v", err)
	}
	if fi, _ := os.Stat(usersPath); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v", fi.Mode())
	}
	before, _ := os.ReadFile(usersPath)
	if !bytes.Contains(before, []byte("desk: [call, see_numbers]")) {
		t.Errorf("profiles lost:\n%s", before)
	}

	os.WriteFile(csvPath, []byte("username,password,role,endpoints\n"+
		"carla,c-pw,user,203\n"+
		"anna,x,user,204\n"+
		"bad name,x,user,205\n"+
		"dario,,boss,206\n"), 0o600)
	out, err := run1("users", "import", csvPath, "--users", usersPath)
	for _, want := range []string{"nothing written", `user "anna"`, "duplicate user"} {
		if err == nil || !strings.Contains(err.Error()+out, want) {
			t.Errorf("bad import: %v, want %q", err, want)
		}
	}
	os.WriteFile(csvPath, []byte("username,password,role,endpoints\nbad name,x,user,205\ndario,,boss,206\n"), 0o600)
	if _, err := run1("users", "import", csvPath, "--users", usersPath); err == nil ||
		!strings.Contains(err.Error(), "people.csv:2") || !strings.Contains(err.Error(), "people.csv:3") {
		t.Errorf("row errors: %v", err)
	}
	if after, _ := os.ReadFile(usersPath); !bytes.Equal(before, after) {
		t.Error("a failed import changed the users file")
	}
	if _, err := run1("users", "import", csvPath); err == nil {
		t.Error("import without --users accepted")
	}

	out, err = run1("users", "list", "--users", usersPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"anna", "Anna Neri", "desk", "201,211", "Verdi, Beppe", "root", "admin", "users file"} {
		if !strings.Contains(out, want) {
			t.Errorf("list lacks %q:\n%s", want, out)
		}
	}
}
