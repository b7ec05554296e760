package nethcti

import (
	"encoding/json"
	"net/http"

	"github.com/ctibridge/ctibridge/auth"
)

// Queue statistics. The web app's queues view (nethvoice-cti
// lib/queuesLib.ts retrieveQueueStats, components/queues/
// StatisticsView.tsx) reads GET /astproxy/queue_astats: per queue the
// user's agent figures (calls_taken, last_call_time in seconds,
// last_login_time, last_logout_time, no_answer_calls) and the user's
// calls (allCalls, incomingCalls, outgoingCalls). nethcti-server counts
// them in Asterisk's queue_log; ctibridge reads no queue_log, so they
// come from the live queues: a member's calls taken and last call, as
// app_queue reports them (since the member joined the queue or Asterisk
// started). The login, logout, missed-call and call-duration figures
// are left out (the view shows "-"). The queue manager's own reads
// (qmanager_*, qalarms, qrecall_info, queue_recall) need queue_log's
// history and answer 501 (notQueueLog).

// agentStats is one queue's figures of the user as its agent.
type agentStats struct {
	CallsTaken   int   `json:"calls_taken"`
	LastCallTime int64 `json:"last_call_time,omitempty"` // Unix seconds
}

// queueAStats serves GET /astproxy/queue_astats: for each queue one of
// the user's extensions is a member of, the user's figures there (a
// user with several of them in a queue: their sum and latest call).
// Like nethcti-server, for a queue agent or manager only (403).
func (f *Front) queueAStats(w http.ResponseWriter, r *http.Request, id Identity, _ bool) int {
	if c := id.User.Caps(); !c.Has(auth.CapQueueAgent) && !c.Has(auth.CapQueueManager) {
		return writeErr(w, r, apiError(http.StatusForbidden, "forbidden", "queue statistics need the queue agent or manager permission"))
	}
	rec := newRecorder()
	r.Header.Del("If-None-Match")
	if st := f.native(rec, r, id, http.MethodGet, "/astproxy/queues", nil); st != http.StatusOK {
		return rec.copyTo(w)
	}
	var queues map[string]struct {
		Members map[string]struct {
			CallsTaken int   `json:"callsTaken"`
			LastCall   int64 `json:"lastCall"` // ms
		} `json:"members"`
	}
	if err := json.Unmarshal(rec.body.Bytes(), &queues); err != nil {
		return writeErr(w, r, err)
	}
	out := map[string]agentStats{}
	for name, q := range queues {
		for member, m := range q.Members {
			if !id.User.Owns(member) {
				continue
			}
			s := out[name]
			s.CallsTaken += m.CallsTaken
			s.LastCallTime = max(s.LastCallTime, m.LastCall/1000)
			out[name] = s
		}
	}
	return writeJSON(w, http.StatusOK, out)
}

// notQueueLog answers the queue manager's reads: 501, they need the
// history of Asterisk's queue_log, which ctibridge does not read.
func notQueueLog(w http.ResponseWriter, r *http.Request, _ Identity, _ bool) int {
	return writeErr(w, r, notImplemented("the queue manager's statistics, alarms and recalls need Asterisk's queue_log history, which ctibridge does not read: "+r.URL.Path))
}
