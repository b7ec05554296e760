package phonebook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/ctibridge/ctibridge/upstream"
)

// Doer sends a request whose URL holds only a path and a query to the
// remote service, choosing the server and adding credentials;
// *upstream.Client satisfies it.
type Doer interface {
	Do(req *http.Request) (*http.Response, error)
}

// RemoteConfig configures a Remote. The zero value is usable.
type RemoteConfig struct {
	// UserHeader carries the acting user's name on every request; the
	// remote applies its own visibility and ownership rules to that
	// user. Default "X-CTI-User".
	UserHeader string
	// Normalizer keys the Lookup cache (numbers written differently
	// share an entry).
	Normalizer Normalizer
	// LookupTTL is how long a name found (or not) by Lookup is kept.
	// Default 5 min.
	LookupTTL time.Duration
	// Log receives failed background lookups. Default: discard.
	Log *slog.Logger
}

// Remote is a phonebook served by a REST service speaking ctibridge's own
// phonebook routes and JSON (docs/rest.md): /phonebook/search/{term}, /contact/{id},
// /lookup/{number}, /create, /modify_cticontact, /delete_cticontact,
// /import). It offers Book's methods, so rest can serve either. The
// remote enforces ownership; its 400, 403 and 404 answers become
// InvalidError, ErrForbidden and ErrNotFound.
//
// Lookup (for the engine and CSV names) never blocks: it answers from a
// cache and, on a miss, queues the number for Run's workers, which ask
// the remote without a user (public contacts only). Safe for concurrent
// use.
type Remote struct {
	// Immutable after NewRemote.
	do  Doer
	cfg RemoteConfig
	log *slog.Logger
	q   chan string // numbers to look up, normal form

	mu     sync.Mutex // guards names and queued
	names  map[string]remoteName
	queued map[string]bool
}

type remoteName struct {
	name string
	at   time.Time
}

// maxRemoteNames bounds Remote's lookup cache; when full it is emptied.
const maxRemoteNames = 100000

// NewRemote returns a phonebook forwarding to the service behind d.
func NewRemote(d Doer, cfg RemoteConfig) *Remote {
	if cfg.UserHeader == "" {
		cfg.UserHeader = "X-CTI-User"
	}
	if cfg.LookupTTL <= 0 {
		cfg.LookupTTL = 5 * time.Minute
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Remote{do: d, cfg: cfg, log: log.With("component", "phonebook"), q: make(chan string, 256),
		names: map[string]remoteName{}, queued: map[string]bool{}}
}

// call sends a request as user and decodes a 200's JSON into out (when
// not nil).
func (r *Remote) call(ctx context.Context, user, method, path string, body io.Reader, ctype string, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, path, body)
	if err != nil {
		return fmt.Errorf("phonebook: remote: %w", err)
	}
	if user != "" {
		req.Header.Set(r.cfg.UserHeader, user)
	}
	req.Header.Set("Accept", "application/json")
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := r.do.Do(req)
	if err != nil {
		return fmt.Errorf("phonebook: remote: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return remoteError(resp)
	}
	if out == nil {
		io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("phonebook: remote: %s %s: %w", method, path, err)
	}
	return nil
}

// remoteError turns an error answer ({"error":{"code","message"}}) into
// this package's errors.
func remoteError(resp *http.Response) error {
	msg := upstream.ErrorMessage(resp)
	switch resp.StatusCode {
	case http.StatusNotFound:
		return ErrNotFound
	case http.StatusForbidden:
		return ErrForbidden
	case http.StatusBadRequest:
		return &InvalidError{"remote", msg}
	}
	return fmt.Errorf("phonebook: remote answered %s: %.200s", resp.Status, msg)
}

func jsonBody(v any) (io.Reader, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("phonebook: remote: %w", err)
	}
	return bytes.NewReader(b), nil
}

// Search is Book.Search on the remote.
func (r *Remote) Search(ctx context.Context, a Actor, term string, limit, offset int) (Page, error) {
	q := url.Values{"limit": {strconv.Itoa(limit)}, "offset": {strconv.Itoa(offset)}}
	var p Page
	err := r.call(ctx, a.User, http.MethodGet, "/phonebook/search/"+url.PathEscape(term)+"?"+q.Encode(), nil, "", &p)
	if p.Rows == nil {
		p.Rows = []Contact{}
	}
	return p, err
}

// Get is Book.Get on the remote.
func (r *Remote) Get(ctx context.Context, a Actor, id int64) (Contact, error) {
	var c Contact
	err := r.call(ctx, a.User, http.MethodGet, "/phonebook/contact/"+strconv.FormatInt(id, 10), nil, "", &c)
	return c, err
}

// LookupContacts is Book.LookupContacts on the remote.
func (r *Remote) LookupContacts(ctx context.Context, a Actor, number string) ([]Contact, error) {
	var p Page
	if err := r.call(ctx, a.User, http.MethodGet, "/phonebook/lookup/"+url.PathEscape(number), nil, "", &p); err != nil {
		return nil, err
	}
	if p.Rows == nil {
		p.Rows = []Contact{}
	}
	return p.Rows, nil
}

// Create is Book.Create on the remote.
func (r *Remote) Create(ctx context.Context, a Actor, c Contact) (Contact, error) {
	return r.postContact(ctx, a, "/phonebook/create", c)
}

// Modify is Book.Modify on the remote.
func (r *Remote) Modify(ctx context.Context, a Actor, c Contact) (Contact, error) {
	return r.postContact(ctx, a, "/phonebook/modify_cticontact", c)
}

// postContact posts c as JSON to path and returns the contact the remote
// answered with.
func (r *Remote) postContact(ctx context.Context, a Actor, path string, c Contact) (Contact, error) {
	body, err := jsonBody(c)
	if err != nil {
		return Contact{}, err
	}
	var out Contact
	err = r.call(ctx, a.User, http.MethodPost, path, body, "application/json", &out)
	return out, err
}

// Delete is Book.Delete on the remote.
func (r *Remote) Delete(ctx context.Context, a Actor, id int64) error {
	body, err := jsonBody(map[string]int64{"id": id})
	if err != nil {
		return err
	}
	return r.call(ctx, a.User, http.MethodPost, "/phonebook/delete_cticontact", body, "application/json", nil)
}

// Import is Book.Import on the remote; the CSV streams through.
func (r *Remote) Import(ctx context.Context, a Actor, csv io.Reader, opt ImportOptions) (ImportReport, error) {
	q := url.Values{}
	if opt.Type != "" {
		q.Set("type", opt.Type)
	}
	if opt.AllOrNothing {
		q.Set("all_or_nothing", "true")
	}
	var rep ImportReport
	err := r.call(ctx, a.User, http.MethodPost, "/phonebook/import?"+q.Encode(), csv, "text/csv", &rep)
	if rep.Errors == nil {
		rep.Errors = []LineError{}
	}
	return rep, err
}

// Lookup returns the cached name for number, or "" (and queues a
// lookup for Run). It never blocks.
func (r *Remote) Lookup(number string) string {
	k := r.cfg.Normalizer.Normalize(number)
	if k == "" {
		return ""
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.names[k]
	if ok && time.Since(e.at) < r.cfg.LookupTTL {
		return e.name
	}
	if !r.queued[k] {
		select {
		case r.q <- k:
			r.queued[k] = true
		default: // full: a later Lookup queues it
		}
	}
	return e.name // stale or ""
}

// Run answers queued lookups with 4 workers until ctx ends, and returns
// ctx's error after they stopped.
func (r *Remote) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case k := <-r.q:
					r.fetch(ctx, k)
				}
			}
		})
	}
	wg.Wait()
	return ctx.Err()
}

func (r *Remote) fetch(ctx context.Context, k string) {
	cs, err := r.LookupContacts(ctx, Actor{}, k)
	name := ""
	for _, c := range cs {
		if c.Type == TypePublic {
			name = c.DisplayName()
			break
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.queued, k)
	if err != nil && !errors.Is(err, ErrNotFound) {
		if ctx.Err() == nil {
			r.log.Warn("phonebook remote lookup failed", "err", err)
		}
		return
	}
	if len(r.names) >= maxRemoteNames {
		r.names = map[string]remoteName{}
	}
	r.names[k] = remoteName{name: name, at: time.Now()}
}
