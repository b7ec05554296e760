package loadtest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// A login that times out is tried again; one refused is not.
func TestLoginRetriesTimeout(t *testing.T) {
	defer func(d time.Duration) { clientTimeout = d }(clientTimeout)
	clientTimeout = 200 * time.Millisecond
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			time.Sleep(400 * time.Millisecond) // past the client's timeout
		}
		if r.Header.Get("Content-Type") != "application/json" || r.ContentLength <= 2 {
			http.Error(w, "no body", 400)
			return
		}
		w.Write([]byte(`{"token":"t0k"}`))
	}))
	defer srv.Close()
	tok, err := Login(context.Background(), srv.URL, "admin", "admin", false)
	if err != nil || tok != "t0k" || calls.Load() != 2 {
		t.Fatalf("token %q, err %v after %d tries; want t0k after 2", tok, err, calls.Load())
	}

	calls.Store(1) // no more sleeping
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		http.Error(w, "bad password", 401)
	}))
	defer bad.Close()
	if _, err := Login(context.Background(), bad.URL, "admin", "x", false); err == nil || calls.Load() != 2 {
		t.Fatalf("err %v after %d tries; want a refusal after 1", err, calls.Load()-1)
	}
}
