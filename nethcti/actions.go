package nethcti

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
	"github.com/ctibridge/ctibridge/rest"
)

// Actions with NethCTI's bodies. The clients send more fields than an
// action reads (phone-island's endpointTpe, endpointType, applicantId;
// paused; convid on pickup_conv) and NethCTI's own shapes of dnd and
// cfcall: here they are read leniently, then put in the native body and
// served by the native action (its checks, permissions and AMI), so an
// action means the same on both APIs. The actions the native API has no
// route for are below: the PBX's where AMI has one (PlayDTMF, MuteAudio,
// Hangup through the native hangup), the phone's action URLs where only
// the phone can (answer, hold), and a 501 with the reason otherwise.

// flexString takes a JSON string, number or boolean as text (the
// clients send ids both ways, and paused as a boolean).
type flexString string

func (s *flexString) UnmarshalJSON(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	switch t := v.(type) {
	case string:
		*s = flexString(t)
	case float64:
		*s = flexString(strconv.FormatFloat(t, 'f', -1, 64))
	case bool:
		*s = flexString(strconv.FormatBool(t))
	}
	return nil
}

// nethReq is every field a NethCTI action body may carry that the front
// reads.
type nethReq struct {
	ConvID       flexString `json:"convid"`
	EndpointID   flexString `json:"endpointId"`
	EndpointType flexString `json:"endpointType"`
	EndpointTpe  flexString `json:"endpointTpe"` // phone-island's spelling
	DestID       flexString `json:"destId"`
	To           flexString `json:"to"`
	Number       flexString `json:"number"`
	Parking      flexString `json:"parking"`
	QueueID      flexString `json:"queueId"`
	Reason       flexString `json:"reason"`
	Paused       flexString `json:"paused"`
	Endpoint     flexString `json:"endpoint"`
	Status       flexString `json:"status"`
	Type         flexString `json:"type"`
	Exten        flexString `json:"exten"`
	Tone         flexString `json:"tone"`
}

// Native bodies (rest's request types, field for field).
type (
	convBody struct {
		ConvID     string `json:"convid"`
		EndpointID string `json:"endpointId"`
	}
	convToBody struct {
		ConvID     string `json:"convid"`
		EndpointID string `json:"endpointId"`
		To         string `json:"to"`
	}
	convDestBody struct {
		ConvID     string `json:"convid"`
		EndpointID string `json:"endpointId"`
		DestID     string `json:"destId"`
	}
	queueBody struct {
		EndpointID string `json:"endpointId"`
		QueueID    string `json:"queueId"`
		Reason     string `json:"reason,omitempty"`
	}
)

// translated are the actions the native API serves, with the body it
// takes made from NethCTI's.
var translated = map[string]func(q *nethReq) (any, error){
	"call": func(q *nethReq) (any, error) {
		if t := q.endpointType(); t != "" && t != "extension" {
			return nil, notImplemented("call from a " + t + " endpoint: ctibridge calls from extensions only")
		}
		return struct {
			Number     string `json:"number"`
			EndpointID string `json:"endpointId,omitempty"`
		}{string(q.Number), string(q.EndpointID)}, nil
	},
	"hangup":        convOnly,
	"park":          convOnly,
	"start_record":  convOnly,
	"stop_record":   convOnly,
	"mute_record":   convOnly,
	"unmute_record": convOnly,
	"blindtransfer": convTo,
	"atxfer":        convTo,
	"start_spy":     convDest,
	"intrude":       convDest,
	"pickup_conv": func(q *nethReq) (any, error) {
		return struct {
			EndpointID string `json:"endpointId"`
			DestID     string `json:"destId"`
		}{string(q.EndpointID), string(q.DestID)}, nil
	},
	"pickup_parking": func(q *nethReq) (any, error) {
		return struct {
			Parking string `json:"parking"`
			DestID  string `json:"destId"`
		}{string(q.Parking), string(q.DestID)}, nil
	},
	"dnd": func(q *nethReq) (any, error) {
		on, err := onOff(q.Status)
		return struct {
			EndpointID string `json:"endpointId"`
			Activate   bool   `json:"activate"`
		}{q.endpoint(), on}, err
	},
	"cfcall": func(q *nethReq) (any, error) {
		on, err := onOff(q.Status)
		to := string(q.To)
		if !on {
			to = ""
		}
		return struct {
			EndpointID string `json:"endpointId"`
			Type       string `json:"type"`
			To         string `json:"to"`
		}{q.endpoint(), string(q.Type), to}, err
	},
	"queuemember_add":     queueMember,
	"queuemember_remove":  queueMember,
	"queuemember_pause":   queueMember,
	"queuemember_unpause": queueMember,
	"force_hangup": func(q *nethReq) (any, error) {
		if t := q.endpointType(); t != "" && t != "extension" {
			return nil, badRequest("endpointType must be extension")
		}
		return convOnly(q)
	},
}

func convOnly(q *nethReq) (any, error) {
	return convBody{string(q.ConvID), string(q.EndpointID)}, nil
}

func convTo(q *nethReq) (any, error) {
	return convToBody{string(q.ConvID), string(q.EndpointID), string(q.To)}, nil
}

func convDest(q *nethReq) (any, error) {
	return convDestBody{string(q.ConvID), string(q.EndpointID), string(q.DestID)}, nil
}

func queueMember(q *nethReq) (any, error) {
	return queueBody{string(q.EndpointID), string(q.QueueID), string(q.Reason)}, nil
}

func (q *nethReq) endpointType() string {
	if q.EndpointType != "" {
		return string(q.EndpointType)
	}
	return string(q.EndpointTpe)
}

// endpoint is dnd's and cfcall's endpoint (NethCTI's "endpoint", or
// "endpointId").
func (q *nethReq) endpoint() string {
	if q.Endpoint != "" {
		return string(q.Endpoint)
	}
	return string(q.EndpointID)
}

func onOff(s flexString) (bool, error) {
	switch s {
	case "on", "true":
		return true, nil
	case "off", "false", "":
		return false, nil
	}
	return false, badRequest(`status must be "on" or "off"`)
}

func notImplemented(reason string) error {
	return apiError(http.StatusNotImplemented, "not_implemented", reason)
}

// action serves POST /astproxy/{name}.
func (f *Front) action(w http.ResponseWriter, r *http.Request, id Identity, _ bool) int {
	name := r.PathValue("name")
	var q nethReq
	if err := decodeLenient(w, r, &q); err != nil {
		return writeErr(w, r, err)
	}
	if tr, ok := translated[name]; ok {
		body, err := tr(&q)
		if err != nil {
			return writeErr(w, r, err)
		}
		if name == "force_hangup" {
			name = "hangup"
		}
		if name == "queuemember_add" && q.Paused == "true" {
			return f.addPaused(w, r, id, body.(queueBody))
		}
		return f.nativeJSON(w, r, id, "/astproxy/"+name, body)
	}
	switch name {
	case "dtmf":
		return f.dtmf(w, r, id, &q)
	case "mute", "unmute":
		return f.muteAudio(w, r, id, &q, name == "mute")
	case "answer":
		return f.press(w, r, id, string(q.EndpointID), phoneAnswer)
	case "toggle_hold":
		return f.press(w, r, id, string(q.EndpointID), phoneHold)
	case "toggle_mute":
		return f.press(w, r, id, string(q.EndpointID), phoneMute)
	case "hangup_mainexten":
		return f.hangupAll(w, r, id, string(q.Exten), func(calls.Conversation) bool { return true })
	case "cancel":
		// The island's hang-up before its call has an id: the user's
		// device's calls not connected yet (ringing, dialling).
		return f.hangupAll(w, r, id, string(q.EndpointID), func(c calls.Conversation) bool { return !c.Connected })
	case "recall_on_busy":
		return writeErr(w, r, notImplemented("recall_on_busy needs NethVoice's call-back dialplan; ctibridge does not set it up"))
	}
	return writeErr(w, r, apiError(http.StatusNotFound, "not_found", "no such action: "+name))
}

type step struct {
	path string
	body any
}

// nativeSteps runs native actions in order, stopping at the first
// failure (answered as the native API answered it).
func (f *Front) nativeSteps(w http.ResponseWriter, r *http.Request, id Identity, steps []step) int {
	for _, s := range steps {
		rec := newRecorder()
		b, _ := json.Marshal(s.body)
		f.native(rec, r, id, http.MethodPost, s.path, b)
		if rec.status != http.StatusOK {
			return rec.copyTo(w)
		}
	}
	return writeJSON(w, http.StatusOK, struct{}{})
}

// addPaused adds a queue member, waits until the PBX reports it a member
// (QueueMemberAdded), then pauses it: NethCTI's queuemember_add with
// paused true, as two native actions.
func (f *Front) addPaused(w http.ResponseWriter, r *http.Request, id Identity, body queueBody) int {
	rec := newRecorder()
	b, _ := json.Marshal(body)
	if f.native(rec, r, id, http.MethodPost, "/astproxy/queuemember_add", b); rec.status != http.StatusOK {
		return rec.copyTo(w)
	}
	deadline := time.Now().Add(f.cfg.ActionTimeout)
	for !f.isMember(body.EndpointID, body.QueueID) {
		if time.Now().After(deadline) {
			return writeErr(w, r, apiError(http.StatusGatewayTimeout, "pbx_timeout", "the member was added but the PBX did not report it in time to pause it"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	return f.nativeSteps(w, r, id, []step{{"/astproxy/queuemember_pause", body}})
}

// isMember reports whether the state shows exten a member of queue.
func (f *Front) isMember(exten, queue string) bool {
	s := f.cfg.State.Snapshot()
	name, _ := s.QueueName(queue)
	q, ok := s.Queues.Lookup(name)
	if !ok {
		return false
	}
	_, ok = q.Members[exten]
	return ok
}

// hangupAll hangs up, through the native hangup, the conversations of
// exten that keep selects; 409 when there is none.
func (f *Front) hangupAll(w http.ResponseWriter, r *http.Request, id Identity, exten string, keep func(calls.Conversation) bool) int {
	x, status := f.extensionFor(w, r, id, "the extension", exten, auth.Hangup, "hangup on")
	if status != 0 {
		return status
	}
	var ids []string
	for cid, c := range x.Conversations {
		if keep(c) {
			ids = append(ids, cid)
		}
	}
	if len(ids) == 0 {
		return writeErr(w, r, apiError(http.StatusConflict, "conflict", "extension "+exten+" has no call to hang up"))
	}
	sort.Strings(ids)
	steps := make([]step, len(ids))
	for i, cid := range ids {
		steps[i] = step{"/astproxy/hangup", convBody{cid, exten}}
	}
	return f.nativeSteps(w, r, id, steps)
}

// ownConv checks that the user may control endpoint's calls (auth.Hangup,
// as hanging up) and finds conversation convid: the endpoint's own
// channel and the other party's.
func (f *Front) ownConv(u *auth.User, endpoint, convid string) (own, other string, err error) {
	if err := auth.CheckEndpoint(endpoint); err != nil {
		return "", "", badRequest("endpointId: " + err.Error())
	}
	if !auth.Allowed(u, auth.Hangup, endpoint) {
		return "", "", apiError(http.StatusForbidden, "forbidden", u.Username+" may not control the calls of "+endpoint)
	}
	x, ok := f.cfg.State.Snapshot().Extensions.Lookup(endpoint)
	if !ok {
		return "", "", apiError(http.StatusNotFound, "not_found", "extension "+endpoint+" does not exist")
	}
	_, own, other, err = rest.ConvChannels(x, convid)
	return own, other, err
}

// sendAMI sends one action and answers 200 {} or the error.
func (f *Front) sendAMI(w http.ResponseWriter, r *http.Request, m ami.Message) int {
	if f.cfg.PBX == nil {
		return writeErr(w, r, ami.ErrNotConnected)
	}
	if err := m.Validate(); err != nil {
		return writeErr(w, r, err)
	}
	ctx, cancel := context.WithTimeout(r.Context(), f.cfg.ActionTimeout)
	defer cancel()
	if _, err := f.cfg.PBX.Do(ctx, m); err != nil {
		return writeErr(w, r, err)
	}
	return writeJSON(w, http.StatusOK, struct{}{})
}

// dtmf plays a key to the other party of the user's conversation (AMI
// PlayDTMF on the other party's channel), whatever the device.
func (f *Front) dtmf(w http.ResponseWriter, r *http.Request, id Identity, q *nethReq) int {
	tone := string(q.Tone)
	if len(tone) != 1 || !isDTMF(tone[0]) {
		return writeErr(w, r, badRequest("tone must be one of 0-9, *, #, A-D"))
	}
	_, other, err := f.ownConv(id.User, string(q.EndpointID), string(q.ConvID))
	if err != nil {
		return writeErr(w, r, err)
	}
	if other == "" {
		return writeErr(w, r, apiError(http.StatusConflict, "conflict", "the conversation has no other party"))
	}
	return f.sendAMI(w, r, ami.NewAction("PlayDTMF", "Channel", other, "Digit", tone))
}

func isDTMF(c byte) bool {
	return c >= '0' && c <= '9' || c == '*' || c == '#' || c >= 'A' && c <= 'D'
}

// muteAudio stops (or restores) the user's voice reaching the other
// party: AMI MuteAudio on the user's own channel, direction in.
func (f *Front) muteAudio(w http.ResponseWriter, r *http.Request, id Identity, q *nethReq, on bool) int {
	own, _, err := f.ownConv(id.User, string(q.EndpointID), string(q.ConvID))
	if err != nil {
		return writeErr(w, r, err)
	}
	state := "off"
	if on {
		state = "on"
	}
	return f.sendAMI(w, r, ami.NewAction("MuteAudio", "Channel", own, "Direction", "in", "State", state))
}

// press sends a desk phone's action URL (answer, hold, mute key) for one
// of the user's extensions, or answers 501 saying why it cannot.
func (f *Front) press(w http.ResponseWriter, r *http.Request, id Identity, endpoint string, action int) int {
	if endpoint == "" && len(id.User.Endpoints) > 0 {
		endpoint = id.User.Endpoints[0]
	}
	x, status := f.extensionFor(w, r, id, "endpointId", endpoint, auth.Call, "use the phone of")
	if status != 0 {
		return status
	}
	what := phoneActionNames[action]
	if t := f.endpointType(endpoint); t != "physical" {
		return writeErr(w, r, notImplemented("a "+t+" device does its own "+what+" (the client on it); ctibridge has no channel to it"))
	}
	if f.cfg.Phone == nil {
		return writeErr(w, r, notImplemented("phone action URLs are not enabled on this bridge"))
	}
	p := f.phoneFor(x.SIPUserAgent)
	switch {
	case p == nil:
		return writeErr(w, r, notImplemented("no action URL is known for the phone of "+endpoint+" (user agent "+strconv.Quote(x.SIPUserAgent)+")"))
	case p.urls[action] == "":
		return writeErr(w, r, notImplemented(p.vendor+" phones have no "+what+" action URL configured"))
	case x.IP == "":
		return writeErr(w, r, apiError(http.StatusConflict, "conflict", "the phone of "+endpoint+" has no known address (not registered)"))
	}
	ctx, cancel := context.WithTimeout(r.Context(), f.cfg.ActionTimeout)
	defer cancel()
	if err := f.cfg.Phone.Press(ctx, expandPhoneURL(p.urls[action], x.IP)); err != nil {
		return writeErr(w, r, &rest.Error{Status: http.StatusBadGateway, Code: "phone_error", Message: "the phone of " + endpoint + " did not take the " + what + ": " + err.Error(), Err: err})
	}
	return writeJSON(w, http.StatusOK, struct{}{})
}

func expandPhoneURL(tmpl, ip string) string {
	if a := net.ParseIP(ip); a != nil && a.To4() == nil {
		ip = "[" + ip + "]" // IPv6
	}
	return strings.ReplaceAll(tmpl, "{ip}", ip)
}

// extensionFor checks exten (field names it in the error), that the user
// may do a on it (verb says what, in the refusal), and reads it from the
// current state. On failure it has written the error and returns its
// status; 0 otherwise.
func (f *Front) extensionFor(w http.ResponseWriter, r *http.Request, id Identity, field, exten string, a auth.Action, verb string) (calls.Extension, int) {
	if err := auth.CheckEndpoint(exten); err != nil {
		return calls.Extension{}, writeErr(w, r, badRequest(field+": "+err.Error()))
	}
	if !auth.Allowed(id.User, a, exten) {
		return calls.Extension{}, writeErr(w, r, apiError(http.StatusForbidden, "forbidden", id.User.Username+" may not "+verb+" "+exten))
	}
	x, ok := f.cfg.State.Snapshot().Extensions.Lookup(exten)
	if !ok {
		return calls.Extension{}, writeErr(w, r, apiError(http.StatusNotFound, "not_found", "extension "+exten+" does not exist"))
	}
	return x, 0
}
