package main

import (
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/site"
)

// TestCheckConfigPBXs: check-config names each problem of --pbx and of
// the pbxs section, and users of PBXs that are not followed.
func TestCheckConfigPBXs(t *testing.T) {
	dir := t.TempDir()
	hash, _ := auth.HashPassword("pw", 4)
	users := writeFile(t, "users.yaml", "users:\n  - {username: sam, password_hash: \""+hash+"\", endpoints: [\"site3:201\"], pbxs: [rome]}\n")
	env := map[string]string{"CTIBRIDGE_AMI_SECRET": "s", "CTIBRIDGE_AMI_USER": "u", "CTIBRIDGE_DATA_DIR": dir}
	for _, c := range []struct {
		pbx, want string
	}{
		{"site2=127.0.0.1:5038,site2=127.0.0.1:5039", `PBX "site2" given twice`},
		{"site2=nohost", `PBX "site2"`},
		{"site:2=127.0.0.1:5038", `PBX name "site:2"`},
		{"default=127.0.0.1:5038", `reserved`},
		{"site2", `want NAME=host:port`},
	} {
		out, err := checkConfig(t, env, "--pbx", c.pbx)
		if err == nil || !strings.Contains(out, c.want) || !strings.Contains(out, "--pbx") {
			t.Errorf("--pbx %s: %v\n%s\nwant %q", c.pbx, err, out, c.want)
		}
	}
	cfg := writeFile(t, "ctibridge.yaml", "pbx: site2=127.0.0.1:5038\npbxs:\n  site2: {ami-user: x}\n  site9: {ami-secret: y}\n")
	if out, err := checkConfig(t, env, "--config", cfg); err == nil || !strings.Contains(out, `PBX "site9" is not given by --pbx`) {
		t.Errorf("pbxs naming an unknown PBX: %v\n%s", err, out)
	}
	cfg = writeFile(t, "bad.yaml", "pbxs:\n  site2: {ami-usr: x}\n")
	if out, err := checkConfig(t, env, "--config", cfg, "--pbx", "site2=127.0.0.1:5038"); err == nil || !strings.Contains(out, `unknown key "ami-usr"`) {
		t.Errorf("a misspelt key in pbxs: %v\n%s", err, out)
	}
	out, err := checkConfig(t, map[string]string{"CTIBRIDGE_AMI_SECRET": "s", "CTIBRIDGE_AMI_USER": "u", "CTIBRIDGE_DATA_DIR": dir, "CTIBRIDGE_USERS": users},
		"--pbx", "site2=127.0.0.1:5038")
	if err == nil || !strings.Contains(out, `user "sam": key "endpoints"`) || !strings.Contains(out, `PBX "site3" is not given`) ||
		!strings.Contains(out, `user "sam": key "pbxs"`) || !strings.Contains(out, `PBX "rome" is not given`) {
		t.Errorf("users of unknown PBXs: %v\n%s", err, out)
	}
	cfg = writeFile(t, "good.yaml", "pbx: site2=127.0.0.1:5038\npbxs:\n  site2: {ami-user: x, ami-tls: true}\n")
	if out, err := checkConfig(t, env, "--config", cfg); err != nil {
		t.Errorf("a good config: %v\n%s", err, out)
	}
}

// TestPBXConfig: each PBX's engine gets the names and cellphones of the
// users file's endpoints on it, by its own ids (the default PBX none of
// site2's, which would make it an offline extension "site2:201"), and
// names a ringing caller for the users of the rung extension's combined
// id.
func TestPBXConfig(t *testing.T) {
	hash, _ := auth.HashPassword("pw", 4)
	users, err := auth.NewUsers([]auth.User{
		{Username: "ada", Name: "Ada Lovelace", PasswordHash: hash, Endpoints: []string{"201"}, Cellphone: "3330000001"},
		{Username: "sam", Name: "Sam Sito", PasswordHash: hash, Endpoints: []string{"site2:201"}, Cellphone: "3331234567"},
	})
	if err != nil {
		t.Fatal(err)
	}
	c := &serveConfig{pbx: "site2=127.0.0.1:5039"}
	ecfg := engineConfig(c, bridgeIn{users: users, names: map[string]string{"202": "Bob"}, log: slog.New(slog.DiscardHandler)}, nil, nil)
	var rung []string
	ecfg.RingLookup = func(exten, number string) string { rung = append(rung, exten); return "" }
	specs, err := parsePBXs(c)
	if err != nil {
		t.Fatal(err)
	}
	def := pbxConfigs{specs: specs, eng: ecfg}.defaultConfig()
	site2 := site.PBXConfig(ecfg, "site2", func(n string) bool { return n == "site2" })
	if !maps.Equal(def.Names, map[string]string{"201": "Ada Lovelace", "202": "Bob"}) || !maps.Equal(def.Cellphones, map[string]string{"201": "3330000001"}) {
		t.Errorf("default PBX: names %v, cellphones %v", def.Names, def.Cellphones)
	}
	if !maps.Equal(site2.Names, map[string]string{"201": "Sam Sito"}) || !maps.Equal(site2.Cellphones, map[string]string{"201": "3331234567"}) {
		t.Errorf("site2: names %v, cellphones %v", site2.Names, site2.Cellphones)
	}
	def.RingLookup("201", "0612345678")
	site2.RingLookup("201", "0612345678")
	if !slices.Equal(rung, []string{"201", "site2:201"}) {
		t.Errorf("ring lookups for %v", rung)
	}
	if one := (pbxConfigs{eng: ecfg}).defaultConfig(); !maps.Equal(one.Names, ecfg.Names) {
		t.Errorf("one PBX: names %v, want %v", one.Names, ecfg.Names)
	}
}
