package phonebook

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/upstream"
)

// remoteServer is a NethCTI-compatible phonebook over a Book (the user
// from X-CTI-User; "root" is an admin), as ctibridge's rest serves it.
func remoteServer(t *testing.T) *httptest.Server {
	b := NewBook(NewSQLite(openSQLite(t), italy), Config{Normalizer: italy})
	mux := http.NewServeMux()
	actor := func(r *http.Request) Actor {
		u := r.Header.Get("X-CTI-User")
		return Actor{User: u, Admin: u == "root"}
	}
	reply := func(w http.ResponseWriter, v any, err error) {
		status := 200
		switch {
		case errors.Is(err, ErrNotFound):
			status = 404
		case errors.Is(err, ErrForbidden):
			status = 403
		case IsInvalid(err):
			status = 400
		case err != nil:
			status = 500
		}
		w.WriteHeader(status)
		if err != nil {
			json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": "x", "message": err.Error()}})
			return
		}
		json.NewEncoder(w).Encode(v)
	}
	mux.HandleFunc("GET /phonebook/search/{term}", func(w http.ResponseWriter, r *http.Request) {
		limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
		offset, _ := strconv.Atoi(r.URL.Query().Get("offset"))
		p, err := b.Search(r.Context(), actor(r), r.PathValue("term"), limit, offset)
		reply(w, p, err)
	})
	mux.HandleFunc("GET /phonebook/contact/{id}", func(w http.ResponseWriter, r *http.Request) {
		id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
		c, err := b.Get(r.Context(), actor(r), id)
		reply(w, c, err)
	})
	mux.HandleFunc("GET /phonebook/lookup/{number}", func(w http.ResponseWriter, r *http.Request) {
		cs, err := b.LookupContacts(r.Context(), actor(r), r.PathValue("number"))
		reply(w, Page{Count: len(cs), Rows: cs}, err)
	})
	write := func(fn func(r *http.Request, c Contact) (any, error)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			var c Contact
			json.NewDecoder(r.Body).Decode(&c)
			v, err := fn(r, c)
			reply(w, v, err)
		}
	}
	mux.HandleFunc("POST /phonebook/create", write(func(r *http.Request, c Contact) (any, error) { return b.Create(r.Context(), actor(r), c) }))
	mux.HandleFunc("POST /phonebook/modify_cticontact", write(func(r *http.Request, c Contact) (any, error) { return b.Modify(r.Context(), actor(r), c) }))
	mux.HandleFunc("POST /phonebook/delete_cticontact", write(func(r *http.Request, c Contact) (any, error) {
		return struct{}{}, b.Delete(r.Context(), actor(r), c.ID)
	}))
	mux.HandleFunc("POST /phonebook/import", func(w http.ResponseWriter, r *http.Request) {
		rep, err := b.Import(r.Context(), actor(r), r.Body, ImportOptions{Type: r.URL.Query().Get("type"), AllOrNothing: r.URL.Query().Get("all_or_nothing") == "true"})
		reply(w, rep, err)
	})
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

func TestRemote(t *testing.T) {
	srv := remoteServer(t)
	c, err := upstream.New(upstream.Config{URLs: []string{srv.URL}})
	if err != nil {
		t.Fatal(err)
	}
	r := NewRemote(c, RemoteConfig{Normalizer: italy})
	alice, bob, root := Actor{User: "alice"}, Actor{User: "bob"}, Actor{User: "root", Admin: true}
	mine, err := r.Create(ctx, alice, Contact{Name: "Mario 100%", WorkPhone: "+39 0721 405516", Notes: "a\nb"})
	if err != nil || mine.ID == 0 || mine.OwnerID != "alice" || mine.Notes != "a\nb" {
		t.Fatalf("create: %+v %v", mine, err)
	}
	if _, err := r.Create(ctx, alice, Contact{Type: TypePublic, Name: "Pub"}); !errors.Is(err, ErrForbidden) {
		t.Fatalf("create public as alice: %v", err)
	}
	if _, err := r.Create(ctx, alice, Contact{}); !IsInvalid(err) {
		t.Fatalf("create empty: %v", err)
	}
	pub, err := r.Create(ctx, root, Contact{Type: TypePublic, Name: "ACME desk", WorkPhone: "0721 999"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		a     Actor
		term  string
		names string
	}{{alice, "m", "ACME desk,Mario 100%"}, {bob, "m", "ACME desk"}, {alice, "0%", "Mario 100%"}, {alice, "a/b?c#d", ""}, {alice, "0721", "ACME desk,Mario 100%"}} {
		p, err := r.Search(ctx, tc.a, tc.term, 10, 0)
		if err != nil || names(p) != tc.names {
			t.Errorf("search %q as %s: %q %v", tc.term, tc.a.User, names(p), err)
		}
	}
	if _, err := r.Get(ctx, bob, mine.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("bob gets alice's: %v", err)
	}
	mine.Name = "Mario R"
	if c, err := r.Modify(ctx, alice, mine); err != nil || c.Name != "Mario R" {
		t.Fatalf("modify: %+v %v", c, err)
	}
	if cs, err := r.LookupContacts(ctx, alice, "0039721405516"); err != nil || len(cs) != 1 || cs[0].Name != "Mario R" {
		t.Fatalf("lookup: %+v %v", cs, err)
	}
	rep, err := r.Import(ctx, bob, strings.NewReader("name,workphone\nAnna,333\n,\n"), ImportOptions{})
	if err != nil || rep.Imported != 1 || len(rep.Errors) != 1 {
		t.Fatalf("import: %+v %v", rep, err)
	}
	if err := r.Delete(ctx, bob, mine.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("bob deletes alice's: %v", err)
	}
	if err := r.Delete(ctx, alice, mine.ID); err != nil {
		t.Fatal(err)
	}
	// Lookup: a miss answers "" at once and is fetched in the background
	// (public contacts only).
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- r.Run(runCtx) }()
	defer func() { cancel(); <-done }()
	if got := r.Lookup("+39 0721 999"); got != "" {
		t.Fatalf("first lookup %q", got)
	}
	deadline := time.Now().Add(5 * time.Second)
	for r.Lookup("0721999") != pub.Name {
		if time.Now().After(deadline) {
			t.Fatal("background lookup never answered")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
