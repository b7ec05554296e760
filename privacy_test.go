package ctibridge_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
	"github.com/ctibridge/ctibridge/nethcti"
	"github.com/ctibridge/ctibridge/rest"
	"github.com/ctibridge/ctibridge/ws"
)

// TestFilteredUserSeesNoHiddenNumber replays recordings of a real Asterisk
// (trunk calls with an outside number, a queue, a park, attended
// transfers, a conference) and, after every published batch, reads every
// live-state REST route as a user who may see no call of the parties,
// while two WebSocket clients of hers take every message (one from the
// start, and a new one at each checkpoint for a fresh snapshot). No byte
// she is sent may hold an outside number or caller name from the
// recording, nor any channel name (channel names hold dialled numbers:
// Local/0612345678@from-internal-...;1).
func TestFilteredUserSeesNoHiddenNumber(t *testing.T) {
	for _, name := range []string{"inbound_trunk_did", "queue_answered", "park_retrieve", "attended_transfer_atxfer", "atxfer_complete", "confbridge_3_party", "blind_transfer_redirect", "load_10_calls_5cps", "pickup_ringing", "confbridge_actions", "originate_click_to_call", "hold_unhold"} {
		t.Run(name, func(t *testing.T) { privacyReplay(t, name) })
	}
}

// channelName matches a channel name in JSON as any technology writes it.
var channelName = regexp.MustCompile(`(PJSIP|SIP|IAX2|Local|DAHDI|Message)/[^"]`)

// secrets are the outside parties of a recording: caller numbers and names
// of trunk channels, and every number of six digits or more.
func secrets(msgs []ami.Message) []string {
	set := map[string]bool{}
	long := regexp.MustCompile(`^\+?[0-9]{6,}$`)
	for _, m := range msgs {
		for _, k := range []string{"CallerIDNum", "ConnectedLineNum", "Exten", "DestExten", "DialString", "DestCallerIDNum", "DestConnectedLineNum"} {
			if v := m.Get(k); long.MatchString(v) {
				set[v] = true
			}
		}
		if strings.HasPrefix(m.Get("Channel"), "PJSIP/trunk-") {
			if v := m.Get("CallerIDName"); v != "" && v != "<unknown>" {
				set[v] = true
			}
		}
	}
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func loadAMI(t *testing.T, name string) []ami.Message {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("ami", "testdata", name+".ami"))
	if os.IsNotExist(err) {
		data, err = os.ReadFile(filepath.Join("calls", "testdata", name+".ami"))
	}
	if err != nil {
		t.Fatal(err)
	}
	r := ami.NewReader(bufio.NewReader(bytes.NewReader(data)), ami.ReaderConfig{})
	if _, err := r.ReadBanner(); err != nil {
		t.Fatal(err)
	}
	var msgs []ami.Message
	for {
		m, err := r.ReadMessage()
		if err == io.EOF {
			return msgs
		}
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
	}
}

// wsTap collects every message a WebSocket client receives.
type wsTap struct {
	mu   sync.Mutex
	msgs [][]byte
	seq  uint64 // highest seq seen
	done chan struct{}
}

func tap(t *testing.T, ctx context.Context, url, token string) *wsTap {
	c, err := ws.Dial(ctx, url, token)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Subscribe("extensions", "queues", "parkings", "trunks", "presence", "me"); err != nil {
		t.Fatal(err)
	}
	w := &wsTap{done: make(chan struct{})}
	go func() {
		defer close(w.done)
		defer c.Close()
		for {
			b, err := c.ReadRaw()
			if err != nil {
				return
			}
			var m ws.Message
			json.Unmarshal(b, &m)
			w.mu.Lock()
			w.msgs = append(w.msgs, append([]byte(nil), b...))
			w.seq = max(w.seq, m.Seq)
			w.mu.Unlock()
			if ctx.Err() != nil {
				return
			}
		}
	}()
	return w
}

// waitSeq waits until the tap has seen seq (or a second has passed: the
// check then runs on what arrived).
func (w *wsTap) waitSeq(seq uint64) {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		w.mu.Lock()
		got := w.seq
		w.mu.Unlock()
		if got >= seq {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (w *wsTap) take() [][]byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := w.msgs
	w.msgs = nil
	return m
}

func privacyReplay(t *testing.T, name string) {
	msgs := loadAMI(t, name)
	hidden := secrets(msgs)
	if strings.Contains(name, "trunk") || strings.Contains(name, "queue") {
		if len(hidden) == 0 {
			t.Fatal("no outside number in a trunk recording: the test would prove nothing")
		}
	}
	// eve owns 209, in none of the recordings' calls: she may see every
	// extension's presence and none of the calls.
	hash, _ := bcrypt.GenerateFromPassword([]byte("secret"), bcrypt.MinCost)
	users, err := auth.NewUsers([]auth.User{{Username: "eve", PasswordHash: string(hash), Endpoints: []string{"209"}}})
	if err != nil {
		t.Fatal(err)
	}
	svc := auth.NewService(users, auth.Config{})
	eve, _ := users.Lookup("eve")
	if auth.ViewOf(eve).Full() {
		t.Fatal("eve sees everything")
	}
	token, _, err := svc.Tokens().Issue("eve")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1796028681, 0)
	var clockMu sync.Mutex
	clock := func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return now }
	eng := calls.New(calls.Config{Now: clock, Trunks: []string{"trunk"}, Names: map[string]string{"209": "Eve"}, Opaque: auth.Opaquer{}})
	eng.Publish()

	api, err := rest.NewHandler(rest.Config{Auth: svc, State: eng})
	if err != nil {
		t.Fatal(err)
	}
	// The NethCTI front (package nethcti) over the same API: every read is
	// made through it too, as eve with the JWT of its login.
	front, err := nethcti.New(nethcti.Config{Auth: svc, API: api, State: eng, Secret: []byte("privacy test secret, 32 bytes!!")})
	if err != nil {
		t.Fatal(err)
	}
	lr := httptest.NewRecorder()
	front.ServeHTTP(lr, httptest.NewRequest("POST", "/api/login", strings.NewReader(`{"username":"eve","password":"secret"}`)))
	var login struct{ Token string }
	if json.Unmarshal(lr.Body.Bytes(), &login); login.Token == "" {
		t.Fatalf("eve's NethCTI login: %d %s", lr.Code, lr.Body)
	}
	hub, err := ws.NewHub(eng, svc, ws.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go hub.Run(ctx)
	mux := http.NewServeMux()
	mux.Handle("GET /ws", hub)
	srv := httptest.NewServer(mux)
	defer func() { cancel(); srv.Close(); hub.Close() }()
	url := "ws" + strings.TrimPrefix(srv.URL, "http") + "/ws"
	live := tap(t, ctx, url, token)

	check := func(where string, b []byte) {
		t.Helper()
		for _, h := range hidden {
			if bytes.Contains(b, []byte(h)) {
				t.Errorf("%s: %q shown to eve: %s", where, h, clip(b, h))
			}
		}
		if loc := channelName.FindIndex(b); loc != nil {
			t.Errorf("%s: a channel name shown to eve: %s", where, clip(b, string(b[loc[0]:loc[1]])))
		}
	}
	get := func(path string) {
		r := httptest.NewRequest("GET", path, nil)
		r.Header.Set("Authorization", "Bearer "+token)
		w := httptest.NewRecorder()
		api.ServeHTTP(w, r)
		check("GET "+path, w.Body.Bytes())
		r = httptest.NewRequest("GET", "/api"+path, nil)
		r.Header.Set("Authorization", "Bearer "+login.Token)
		w = httptest.NewRecorder()
		front.ServeHTTP(w, r)
		if w.Code != http.StatusNotFound {
			check("GET /api"+path, w.Body.Bytes())
		}
	}
	reads := func(s *calls.Snapshot) {
		for _, p := range []string{"/astproxy/status", "/astproxy/extensions", "/astproxy/conversations", "/astproxy/queues",
			"/astproxy/parkings", "/astproxy/trunks", "/astproxy/conferences", "/user/me", "/user/presence",
			"/user/presencelist", "/voicemail/new_counters", "/user/endpoints/all", "/astproxy/opgroups"} {
			get(p)
		}
		for _, k := range s.Extensions.Keys() {
			get("/astproxy/extension/" + k)
			get("/astproxy/dnd/" + k)
		}
		for k, q := range s.Queues.All() {
			get("/astproxy/queue/" + k)
			if q.Number != "" {
				get("/astproxy/queue/" + q.Number)
			}
		}
		for k := range s.Conferences {
			get("/astproxy/conference/" + k)
		}
	}

	for i, m := range msgs {
		eng.Apply(m)
		if i%4 != 3 && i != len(msgs)-1 {
			continue
		}
		clockMu.Lock()
		now = now.Add(700 * time.Millisecond)
		clockMu.Unlock()
		s := eng.Publish()
		s = eng.RefreshDurations()
		reads(s)
		if i%40 == 39 {
			// A new client: its snapshot is the state as of now.
			fresh := tap(t, ctx, url, token)
			fresh.waitSeq(s.Seq)
			for _, b := range fresh.take() {
				check("ws snapshot", b)
			}
		}
	}
	live.waitSeq(eng.Snapshot().Seq)
	got := live.take()
	if len(got) < 3 {
		t.Fatalf("eve's WebSocket got %d messages", len(got))
	}
	opaque := 0
	for _, b := range got {
		check("ws", b)
		opaque += bytes.Count(b, []byte(`"id":"~`)) + bytes.Count(b, []byte(`"id":">~`))
	}
	if opaque == 0 {
		t.Error("eve's WebSocket never carried a conversation: the test proves nothing")
	}
}

func clip(b []byte, h string) string {
	i := bytes.Index(b, []byte(h))
	lo, hi := max(i-120, 0), min(i+len(h)+60, len(b))
	return string(b[lo:hi])
}
