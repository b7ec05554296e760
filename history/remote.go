package history

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/ctibridge/ctibridge/upstream"
)

// Doer sends a request whose URL holds only a path and a query to the
// remote service, choosing the server and adding credentials;
// *upstream.Client satisfies it.
type Doer interface {
	Do(req *http.Request) (*http.Response, error)
}

// ErrReadOnly: a Remote does not take CDRs.
var ErrReadOnly = errors.New("history: the remote history is read only")

// ErrPBXFilter: a Remote cannot keep some PBXs' calls only (Query.PBXs),
// so it answers none rather than every PBX's.
var ErrPBXFilter = errors.New("history: the remote history cannot keep some PBXs' calls only")

// RemoteConfig configures a Remote. The zero value is usable.
type RemoteConfig struct {
	// UserHeader carries Query.Viewer on every request. Default
	// "X-CTI-User".
	UserHeader string
}

// Remote is a Store read from a REST service speaking ctibridge's own
// history routes (docs/rest.md): Query.User's calls from
// /historycall/interval/user/{user}/{from}/{to}, the switchboard's (User
// "") from /histcallswitch/interval/{from}/{to}, Export from their /csv
// variants. Windows are whole days: From and To are sent as the dates
// YYYYMMDD of From and of the day before To, in their own location (rest
// builds them as midnights). The remote applies its own permissions and
// extensions; Query.Extensions is not sent. Insert returns ErrReadOnly.
// Safe for concurrent use.
type Remote struct {
	do  Doer
	cfg RemoteConfig
}

// NewRemote returns a Store reading from the service behind d.
func NewRemote(d Doer, cfg RemoteConfig) *Remote {
	if cfg.UserHeader == "" {
		cfg.UserHeader = "X-CTI-User"
	}
	return &Remote{do: d, cfg: cfg}
}

func (r *Remote) path(q Query, csv bool) string {
	from := q.From.Format("20060102")
	to := q.To.Add(-time.Nanosecond).Format("20060102")
	p := "/histcallswitch/interval/" + from + "/" + to
	if q.User != "" {
		p = "/historycall/interval/user/" + url.PathEscape(q.User) + "/" + from + "/" + to
	}
	if csv {
		p += "/csv"
	}
	v := url.Values{}
	for k, s := range map[string]string{"direction": q.Direction, "text": q.Text, "cursor": q.Cursor} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if q.Limit > 0 && !csv {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if len(v) > 0 {
		p += "?" + v.Encode()
	}
	return p
}

func (r *Remote) get(ctx context.Context, q Query, csv bool) (*http.Response, error) {
	if q.From.IsZero() || q.To.IsZero() || !q.To.After(q.From) {
		return nil, &InvalidError{"a time window with to after from is required"}
	}
	if q.PBXs != nil {
		return nil, ErrPBXFilter
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.path(q, csv), nil)
	if err != nil {
		return nil, fmt.Errorf("history: remote: %w", err)
	}
	if q.Viewer != "" {
		req.Header.Set(r.cfg.UserHeader, q.Viewer)
	}
	resp, err := r.do.Do(req)
	if err != nil {
		return nil, fmt.Errorf("history: remote: %w", err)
	}
	if resp.StatusCode == http.StatusOK {
		return resp, nil
	}
	defer resp.Body.Close()
	msg := upstream.ErrorMessage(resp)
	if resp.StatusCode == http.StatusBadRequest {
		return nil, &InvalidError{msg}
	}
	return nil, fmt.Errorf("history: remote answered %s: %.200s", resp.Status, msg)
}

// Calls implements Store.
func (r *Remote) Calls(ctx context.Context, q Query) (Page, error) {
	resp, err := r.get(ctx, q, false)
	if err != nil {
		return Page{}, err
	}
	defer resp.Body.Close()
	var p Page
	if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
		return Page{}, fmt.Errorf("history: remote: %w", err)
	}
	if p.Rows == nil {
		p.Rows = []Call{}
	}
	return p, nil
}

// Export implements Store from the remote's CSV (ExportCSV's columns),
// streamed; the CDR fields the CSV lacks are empty.
func (r *Remote) Export(ctx context.Context, q Query, fn func(CDR) error) error {
	resp, err := r.get(ctx, q, true)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	cr := csv.NewReader(resp.Body)
	cr.ReuseRecord = true
	head, err := cr.Read()
	if err != nil {
		return fmt.Errorf("history: remote csv: %w", err)
	}
	col := map[string]int{}
	for i, h := range head {
		col[h] = i
	}
	get := func(rec []string, name string) string {
		i, ok := col[name]
		if !ok || i >= len(rec) {
			return ""
		}
		v := rec[i]
		// Undo ExportCSV's formula guard.
		if len(v) > 1 && v[0] == '\'' && (v[1] == '=' || v[1] == '+' || v[1] == '-' || v[1] == '@') {
			v = v[1:]
		}
		return v
	}
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("history: remote csv: %w", err)
		}
		c := CDR{Src: get(rec, "src"), Dst: get(rec, "dst"), Disposition: get(rec, "disposition"), CLID: get(rec, "clid"),
			Channel: get(rec, "channel"), DstChannel: get(rec, "dstchannel"), LastApp: get(rec, "lastapp"),
			DContext: get(rec, "dcontext"), UniqueID: get(rec, "uniqueid"), LinkedID: get(rec, "linkedid"),
			RecordingFile: get(rec, "recordingfile")}
		c.Duration, _ = strconv.Atoi(get(rec, "duration"))
		c.Billsec, _ = strconv.Atoi(get(rec, "billsec"))
		if t, err := time.Parse(time.RFC3339, get(rec, "calldate")); err == nil {
			c.CallDate = t
		}
		if err := fn(c); err != nil {
			return err
		}
	}
}

// Insert implements Store: ErrReadOnly.
func (r *Remote) Insert(context.Context, []CDR) error { return ErrReadOnly }
