package nethcti

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	_ "modernc.org/sqlite"

	"github.com/ctibridge/ctibridge/dbtest"
	"github.com/ctibridge/ctibridge/sqldb"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func storeBackends() map[string]func(t *testing.T) Store {
	return map[string]func(t *testing.T) Store{
		"memory": func(*testing.T) Store { return NewMemStore() },
		"sqlite": func(t *testing.T) Store {
			db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "s.db")+"?_pragma=busy_timeout(10000)&_txlock=immediate")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			if _, err := Schema.MigrateSQLite(context.Background(), db); err != nil {
				t.Fatal(err)
			}
			return NewSQLStore(sqldb.SQL(db))
		},
		"postgres": func(t *testing.T) Store {
			pool, err := pgxpool.New(context.Background(), dbtest.Postgres(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			if _, err := Schema.MigratePostgres(context.Background(), pool); err != nil {
				t.Fatal(err)
			}
			return NewSQLStore(sqldb.Pgx(pool))
		},
	}
}

// TestStores: settings and persistent tokens, the same on every backend.
func TestStores(t *testing.T) {
	for name, open := range storeBackends() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s := open(t)
			if m, err := s.Settings(ctx, "alice"); err != nil || m == nil || len(m) != 0 {
				t.Fatalf("no settings: %v %v, want an empty map", m, err)
			}
			s.PutSetting(ctx, "alice", "avatar", json.RawMessage(`"data:image/png;base64,AAAA"`))
			s.PutSetting(ctx, "alice", "default_extension", json.RawMessage(`"201"`))
			s.PutSetting(ctx, "alice", "default_extension", json.RawMessage(`"91201"`))
			s.PutSetting(ctx, "bob", "avatar", json.RawMessage(`"b"`))
			got, err := s.Settings(ctx, "alice")
			want := map[string]json.RawMessage{"avatar": json.RawMessage(`"data:image/png;base64,AAAA"`), "default_extension": json.RawMessage(`"91201"`)}
			if err != nil || !reflect.DeepEqual(got, want) {
				t.Errorf("settings %s %v, want %s", got, err, want)
			}
			all, err := s.SettingOfAll(ctx, "avatar")
			if err != nil || len(all) != 2 || string(all["bob"]) != `"b"` {
				t.Errorf("avatars %s %v", all, err)
			}
			t1 := TokenRecord{Username: "alice", Audience: "phone-island", Hash: hashOf("one")}
			t2 := TokenRecord{Username: "alice", Audience: "phone-island", Hash: hashOf("two")}
			t3 := TokenRecord{Username: "alice", Audience: "nethlink", Hash: hashOf("three")}
			for _, r := range []TokenRecord{t1, t2, t3} {
				if err := s.PutToken(ctx, r); err != nil {
					t.Fatal(err)
				}
			}
			toks, err := s.Tokens(ctx)
			if err != nil || len(toks) != 2 {
				t.Fatalf("tokens %v %v, want 2 (the second phone-island one replaced the first)", toks, err)
			}
			s.DeleteToken(ctx, "alice", "phone-island")
			toks, _ = s.Tokens(ctx)
			if len(toks) != 1 || toks[0].Hash != t3.Hash {
				t.Errorf("after delete: %v", toks)
			}
		})
	}
}

// downStore is a Store whose database is out of reach.
type downStore struct{ *MemStore }

var errDown = fmt.Errorf("test: %w", sqldb.ErrUnavailable)

func (downStore) Settings(context.Context, string) (map[string]json.RawMessage, error) {
	return nil, errDown
}
func (downStore) PutSetting(context.Context, string, string, json.RawMessage) error { return errDown }
func (downStore) PutToken(context.Context, TokenRecord) error                       { return errDown }

// TestStoreDown: the clients still start (/user/me without settings);
// what must be stored answers 503, and no token is valid that the store
// did not take.
func TestStoreDown(t *testing.T) {
	f := newFixture(t)
	f.front.store = downStore{NewMemStore()}
	if r := f.apiDo("GET", "/user/me", "alice", ""); r.status != 200 || !hasPath(r.json(t), "default_device.id") {
		t.Errorf("/user/me with the database down: %d %s", r.status, r.body)
	}
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/user/settings", `{"a":1}`}, {"POST", "/user/default_device", `{"id":"201"}`},
		{"POST", "/tokens/persistent/phone-island", ""},
	} {
		if r := f.apiDo(c.method, c.path, "alice", c.body); r.status != http.StatusServiceUnavailable {
			t.Errorf("%s %s with the database down: %d %s, want 503", c.method, c.path, r.status, r.body)
		}
	}
	if f.front.hasPersistent("alice", "phone-island") {
		t.Error("a token the store refused is valid")
	}
	if !errors.Is(errDown, sqldb.ErrUnavailable) {
		t.Fatal("errDown is not unavailable")
	}
}

// TestTokensSurviveRestart: a new front over the same database, secret
// and sessions (serve restarted) accepts the login JWT and the
// persistent token, once Run has read the tokens back (503 before).
func TestTokensSurviveRestart(t *testing.T) {
	f := newFixture(t)
	store := storeBackends()["sqlite"](t)
	f.front.store = store
	jwt := f.login("alice")
	r := f.apiDo("POST", "/tokens/persistent/phone-island", "alice", "")
	var it struct{ Token string }
	json.Unmarshal(r.body, &it)
	if it.Token == "" {
		t.Fatalf("persistent token: %d %s", r.status, r.body)
	}
	again, err := New(Config{Auth: f.svc, API: f.api, State: engineState{f.eng}, Secret: testSecret, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := again.CheckJWT(it.Token); !errors.Is(err, errNotLoaded) {
		t.Errorf("persistent token before the read-back: %v, want the not-loaded error", err)
	}
	if err := again.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	for name, tok := range map[string]string{"login": jwt, "persistent": it.Token} {
		id, err := again.CheckToken("alice", tok)
		if err != nil || id.User.Username != "alice" {
			t.Errorf("%s JWT after the restart: %v %v", name, id, err)
		}
	}
	if _, err := again.CheckToken("bob", it.Token); err == nil {
		t.Error("alice's token accepted for bob")
	}
}
