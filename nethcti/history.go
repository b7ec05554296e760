package nethcti

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"

	"github.com/ctibridge/ctibridge/history"
)

// GET /history/calls, the web app's history (nethcti-middleware's):
// callType user (the username's calls), switchboard or group (every
// call), from and to (YYYYMMDD), direction (all, in, out, internal,
// lost), textSearch, sort (newest first only), pageNum (from 1) and
// pageSize; {count, rows} with NethCTI's row fields. It is the native
// history read (its permissions: one's own, the groups', the
// switchboard's), whose cursor pages are walked to the page asked for.

// maxHistoryScan bounds the calls read to answer one page: past it the
// count is of the newest maxHistoryScan calls.
const maxHistoryScan = 5000

// historyRow is a call as NethCTI's rows show it.
type historyRow struct {
	Time          int64  `json:"time"`
	Src           string `json:"src"`
	Dst           string `json:"dst"`
	CNum          string `json:"cnum"`
	CNam          string `json:"cnam"`
	CCompany      string `json:"ccompany"`
	DstCNam       string `json:"dst_cnam"`
	DstCCompany   string `json:"dst_ccompany"`
	Direction     string `json:"direction"`
	Duration      int    `json:"duration"`
	Billsec       int    `json:"billsec"`
	Disposition   string `json:"disposition"`
	UniqueID      string `json:"uniqueid"`
	LinkedID      string `json:"linkedid"`
	Channel       string `json:"channel"`
	DstChannel    string `json:"dstchannel"`
	RecordingFile string `json:"recordingfile"`
	Queue         string `json:"queue"`
}

func rowOf(c history.Call) historyRow {
	r := historyRow{Time: c.Time, Src: c.Src, Dst: c.Dst, CNum: c.Src, CNam: c.CNAM, DstCNam: c.DstCNAM,
		Direction: c.Direction, Duration: c.Duration, Billsec: c.Billsec, Disposition: c.Disposition,
		LinkedID: c.LinkedID, RecordingFile: c.RecordingFile, Queue: c.Queue}
	if r.Direction == "internal" {
		r.Direction = "" // NethCTI's internal calls have no direction
	}
	if len(c.Legs) > 0 {
		r.UniqueID, r.Channel, r.DstChannel = c.Legs[0].UniqueID, c.Legs[0].Channel, c.Legs[0].DstChannel
	}
	return r
}

func (f *Front) historyCalls(w http.ResponseWriter, r *http.Request, id Identity, _ bool) int {
	q := r.URL.Query()
	pageNum, err1 := strconv.Atoi(q.Get("pageNum"))
	pageSize, err2 := strconv.Atoi(q.Get("pageSize"))
	if q.Get("pageNum") == "" {
		pageNum, err1 = 1, nil
	}
	if q.Get("pageSize") == "" {
		pageSize, err2 = 10, nil
	}
	if err1 != nil || err2 != nil || pageNum < 1 || pageSize < 1 || pageSize > 500 {
		return writeErr(w, r, badRequest("pageNum (from 1) and pageSize (1 to 500) must be numbers"))
	}
	if s, _ := url.QueryUnescape(q.Get("sort")); s != "" && s != "time desc" {
		return writeErr(w, r, notImplemented("only sort=time desc (newest first) is served"))
	}
	from, to := q.Get("from"), q.Get("to")
	var path string
	switch q.Get("callType") {
	case "user", "":
		user := q.Get("username")
		if user == "" {
			user = id.User.Username
		}
		path = "/historycall/interval/user/" + url.PathEscape(user) + "/" + url.PathEscape(from) + "/" + url.PathEscape(to)
	case "switchboard", "group":
		path = "/histcallswitch/interval/" + url.PathEscape(from) + "/" + url.PathEscape(to)
	default:
		return writeErr(w, r, badRequest("callType must be user, group or switchboard"))
	}
	dir, lost := q.Get("direction"), false
	switch dir {
	case "all", "":
		dir = ""
	case "in", "out", "internal":
	case "lost":
		dir, lost = "in", true
	default:
		return writeErr(w, r, badRequest("direction must be all, in, out, internal or lost"))
	}
	nq := url.Values{}
	if dir != "" {
		nq.Set("direction", dir)
	}
	if t := q.Get("textSearch"); t != "" {
		nq.Set("text", t)
	}
	return f.historyPage(w, r, id, path, nq, pageNum, pageSize, lost)
}

// historyPage reads the native pages of the window (at most
// maxHistoryScan calls) and answers page pageNum of pageSize rows with
// the count of all (lost: inbound calls not answered, filtered here).
// The native pages carry no total: NethCTI's count needs the walk.
func (f *Front) historyPage(w http.ResponseWriter, r *http.Request, id Identity, path string, nq url.Values,
	pageNum, pageSize int, lost bool) int {
	skip := (pageNum - 1) * pageSize
	out := struct {
		Count int          `json:"count"`
		Rows  []historyRow `json:"rows"`
	}{Rows: []historyRow{}}
	nq.Set("limit", "500")
	for seen := 0; ; {
		rec := newRecorder()
		r2 := r.Clone(r.Context())
		r2.URL.RawQuery = nq.Encode()
		f.native(rec, r2, id, http.MethodGet, path, nil)
		if rec.status != http.StatusOK {
			return rec.copyTo(w)
		}
		var p history.Page
		if err := json.Unmarshal(rec.body.Bytes(), &p); err != nil {
			return writeErr(w, r, err)
		}
		for _, c := range p.Rows {
			seen++
			if lost && (c.Disposition == "ANSWERED" || c.Direction != "in") {
				continue
			}
			if out.Count >= skip && len(out.Rows) < pageSize {
				out.Rows = append(out.Rows, rowOf(c))
			}
			out.Count++
		}
		if p.Next == nil || seen >= maxHistoryScan {
			return writeJSON(w, http.StatusOK, out)
		}
		nq.Set("cursor", *p.Next)
	}
}
