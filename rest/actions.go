package rest

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"strings"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
)

// Actions: each POST /astproxy/<name> checks its body, asks auth.Allowed
// about every endpoint it touches, finds the channels it needs in the
// current snapshot, and only then sends the AMI action(s), one after the
// other, answering 200 {} once Asterisk replied Success to all of them.
// Nothing reaches the PBX before every check passed.

// action is one action route.
type action struct {
	name string
	run  func(h *handler, w http.ResponseWriter, r *http.Request, u *auth.User) ([]ami.Message, target, error)
}

// act binds a request type to an action's planner.
// With several PBXs, the request's ids say which PBX it goes to (route).
func act[T any](name string, plan func(h *handler, u *auth.User, s *calls.Snapshot, req *T) ([]ami.Message, error)) action {
	ids, conv := idFields(reflect.TypeFor[T]())
	return action{name: name, run: func(h *handler, w http.ResponseWriter, r *http.Request, u *auth.User) ([]ami.Message, target, error) {
		var req T
		if err := decode(w, r, &req); err != nil {
			return nil, target{}, err
		}
		t, err := h.route(u, &req, ids, conv)
		if err != nil {
			return nil, t, err
		}
		msgs, err := plan(h, t.user, t.snap, &req)
		return msgs, t, err
	}}
}

type convReq struct {
	ConvID     string `json:"convid"`
	EndpointID string `json:"endpointId"`
}

type convToReq struct {
	ConvID     string `json:"convid"`
	EndpointID string `json:"endpointId"`
	To         string `json:"to"`
}

type convDestReq struct {
	ConvID     string `json:"convid"`
	EndpointID string `json:"endpointId"`
	DestID     string `json:"destId"`
}

type callReq struct {
	Number     string `json:"number"`
	EndpointID string `json:"endpointId"`
}

type pickupConvReq struct {
	EndpointID string `json:"endpointId"`
	DestID     string `json:"destId"`
}

type pickupParkingReq struct {
	Parking string `json:"parking"`
	DestID  string `json:"destId"`
}

type dndReq struct {
	EndpointID string `json:"endpointId"`
	Activate   *bool  `json:"activate"`
}

type cfReq struct {
	EndpointID string  `json:"endpointId"`
	Type       string  `json:"type"`
	To         *string `json:"to"`
}

type queueMemberReq struct {
	EndpointID string `json:"endpointId"`
	QueueID    string `json:"queueId"`
	Reason     string `json:"reason"`
}

var actions = []action{
	act("call", planCall),
	act("hangup", planHangup),
	act("blindtransfer", planBlindTransfer),
	act("atxfer", planAtxfer),
	act("park", planPark),
	act("pickup_conv", planPickupConv),
	act("pickup_parking", planPickupParking),
	act("start_record", planRecord("start")),
	act("stop_record", planRecord("stop")),
	act("mute_record", planRecord("mute")),
	act("unmute_record", planRecord("unmute")),
	act("start_spy", planSpy(auth.Spy, "qE")),
	act("intrude", planSpy(auth.Intrude, "qEB")),
	act("whisper", planSpy(auth.Intrude, "qEw")), // heard by the spied phone only
	act("dnd", planDND),
	act("cfcall", planCF),
	act("queuemember_add", planQueueMember("add")),
	act("queuemember_remove", planQueueMember("remove")),
	act("queuemember_pause", planQueueMember("pause")),
	act("queuemember_unpause", planQueueMember("unpause")),
}

// action returns the route handler of a.
func (h *handler) action(a action) endpoint {
	return func(w http.ResponseWriter, r *http.Request, u *auth.User) int {
		msgs, t, err := a.run(h, w, r, u)
		if err != nil {
			return writeError(w, h.log, r, err)
		}
		if t.pbx == nil {
			return writeError(w, h.log, r, ami.ErrNotConnected)
		}
		for _, m := range msgs {
			if err := m.Validate(); err != nil {
				// Unreachable after the checks above; kept as the last line
				// of defence against AMI injection.
				return writeError(w, h.log, r, err)
			}
		}
		for _, m := range msgs {
			ctx, cancel := context.WithTimeout(r.Context(), h.cfg.ActionTimeout)
			_, err := t.pbx.Do(ctx, m)
			if err != nil && !keyAbsent(ctx, t.pbx, m, err) {
				cancel()
				return writeError(w, h.log, r, err)
			}
			cancel()
		}
		h.refreshAfter(t.refresh, msgs)
		h.noteRecordings(msgs)
		return writeJSON(w, http.StatusOK, struct{}{})
	}
}

// RecordingNoter learns which file a channel is recorded into; Asterisk's
// Cdr event does not say. *history.Recorder satisfies it.
type RecordingNoter interface {
	NoteRecording(channel, file string)
}

// noteRecordings tells the history recorder the file of each MixMonitor
// the PBX accepted, so the call's history row names its recording.
func (h *handler) noteRecordings(msgs []ami.Message) {
	if h.cfg.Recordings == nil {
		return
	}
	for _, m := range msgs {
		if m.Action() == ami.ActionMixMonitor {
			h.cfg.Recordings.NoteRecording(m.Get("Channel"), m.Get("File"))
		}
	}
}

// keyAbsent reports whether a DBDel the PBX refused (err) still leaves the
// state asked for: the key is not there. Asterisk 22 answers a missing key
// and a failed delete alike ("Database entry could not be deleted",
// main/db.c), so the key is read back; DBGet's "Database entry not found"
// settles it. Turning off what is off is then a success, never a 502.
func keyAbsent(ctx context.Context, pbx PBX, m ami.Message, err error) bool {
	var ae *ami.ActionError
	if m.Action() != ami.ActionDBDel || !errors.As(err, &ae) {
		return false
	}
	_, err = pbx.Do(ctx, ami.NewAction(ami.ActionDBGet, "Family", m.Get("Family"), "Key", m.Get("Key")))
	return errors.As(err, &ae) && strings.Contains(strings.ToLower(ae.Message), "not found")
}

// checkNumber validates a number or extension given by the client.
func (h *handler) checkNumber(field, v string) error {
	if v == "" {
		return badRequest("%s is required", field)
	}
	if !h.dial.MatchString(v) {
		return badRequest("%s %q does not match the dial pattern %s", field, v, h.dial.String())
	}
	return nil
}

// endpoint checks that u may do a to endpoint id and that it exists.
func (h *handler) endpoint(u *auth.User, s *calls.Snapshot, a auth.Action, field, id string) (calls.Extension, error) {
	if err := h.checkNumber(field, id); err != nil {
		return calls.Extension{}, err
	}
	if !auth.Allowed(u, a, id) {
		return calls.Extension{}, forbidden("%s may not %s on %s", u.Username, a, id)
	}
	x, ok := s.Extensions.Lookup(id)
	if !ok {
		return calls.Extension{}, notFound("extension %q does not exist", id)
	}
	return x, nil
}

// ownEndpoint is endpointId, or the user's only endpoint when omitted.
func ownEndpoint(u *auth.User, id string) (string, error) {
	if id != "" {
		return id, nil
	}
	if len(u.Endpoints) == 1 {
		return u.Endpoints[0], nil
	}
	return "", badRequest("endpointId is required (the user owns %d endpoints)", len(u.Endpoints))
}

// chanEndpoint is the endpoint of a channel name: "PJSIP/201-0000002a" -> "201".
func chanEndpoint(ch string) string {
	_, rest, ok := strings.Cut(ch, "/")
	if !ok {
		return ""
	}
	if i := strings.LastIndexByte(rest, '-'); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

// convOf finds conversation convid of extension x and splits it into x's
// own channel and the counterpart's ("" when none).
// endpointConv checks that u may do a on endpoint (the endpointId field)
// and finds its conversation convid: the endpoint, the conversation, and
// the endpoint's own and the other party's channels.
func (h *handler) endpointConv(u *auth.User, s *calls.Snapshot, a auth.Action, endpoint, convid string) (x calls.Extension, c calls.Conversation, own, other string, err error) {
	if x, err = h.endpoint(u, s, a, "endpointId", endpoint); err != nil {
		return x, c, "", "", err
	}
	c, own, other, err = convOf(x, convid)
	return x, c, own, other, err
}

func convOf(x calls.Extension, convid string) (c calls.Conversation, own, other string, err error) {
	if convid == "" {
		return c, "", "", badRequest("convid is required")
	}
	c, ok := x.Conversations[convid]
	if !ok && auth.IsOpaque(convid) {
		// The id as a filtered view shows it (auth.OpaqueConvID).
		for id, cv := range x.Conversations {
			if auth.OpaqueConvID(id) == convid {
				c, ok, convid = cv, true, id
				break
			}
		}
	}
	if !ok {
		return c, "", "", conflict("extension %s has no conversation %q", x.Exten, convid)
	}
	src, dst, _ := strings.Cut(convid, ">")
	switch x.Exten {
	case chanEndpoint(src):
		own, other = src, dst
	case chanEndpoint(dst):
		own, other = dst, src
	default:
		return c, "", "", conflict("conversation %q has no channel of extension %s", convid, x.Exten)
	}
	return c, own, other, nil
}

func (h *handler) dev(exten string) string { return h.cfg.ChanTech + "/" + exten }

func planCall(h *handler, u *auth.User, s *calls.Snapshot, req *callReq) ([]ami.Message, error) {
	id, err := ownEndpoint(u, req.EndpointID)
	if err != nil {
		return nil, err
	}
	if err := h.checkNumber("number", req.Number); err != nil {
		return nil, err
	}
	x, err := h.endpoint(u, s, auth.Call, "endpointId", id)
	if err != nil {
		return nil, err
	}
	// Account (the channel's AccountCode, as NethCTI sets it) names the
	// destination: the engine shows it on the first leg, which rings the
	// user's own phone, instead of a call from the phone to itself. Pickup
	// sets it to the caller picked up, spy to the extension spied on.
	return []ami.Message{ami.NewAction(ami.ActionOriginate, append([]string{
		"Channel", h.dev(id), "Context", h.cfg.Context, "Exten", req.Number, "Priority", "1",
		"CallerID", id, "Account", req.Number, "Timeout", "30000", "Async", "true"}, h.autoAnswer(u, x)...)...)}, nil
}

func planHangup(h *handler, u *auth.User, s *calls.Snapshot, req *convReq) ([]ami.Message, error) {
	_, _, own, _, err := h.endpointConv(u, s, auth.Hangup, req.EndpointID, req.ConvID)
	if err != nil {
		return nil, err
	}
	return []ami.Message{ami.NewAction(ami.ActionHangup, "Channel", own, "Cause", "16")}, nil
}

func planBlindTransfer(h *handler, u *auth.User, s *calls.Snapshot, req *convToReq) ([]ami.Message, error) {
	if err := h.checkNumber("to", req.To); err != nil {
		return nil, err
	}
	_, _, _, other, err := h.endpointConv(u, s, auth.Transfer, req.EndpointID, req.ConvID)
	if err != nil {
		return nil, err
	}
	if other == "" {
		return nil, conflict("conversation %q has no other party to transfer", req.ConvID)
	}
	// The other party is sent to the new destination (NethCTI's way);
	// the endpoint's own leg hangs up when the bridge breaks.
	return []ami.Message{ami.NewAction(ami.ActionRedirect,
		"Channel", other, "Context", h.cfg.Context, "Exten", req.To, "Priority", "1")}, nil
}

func planAtxfer(h *handler, u *auth.User, s *calls.Snapshot, req *convToReq) ([]ami.Message, error) {
	if err := h.checkNumber("to", req.To); err != nil {
		return nil, err
	}
	_, c, own, _, err := h.endpointConv(u, s, auth.Transfer, req.EndpointID, req.ConvID)
	if err != nil {
		return nil, err
	}
	if !c.Connected {
		return nil, conflict("conversation %q is not connected", req.ConvID)
	}
	return []ami.Message{ami.NewAction(ami.ActionAtxfer, "Channel", own, "Exten", req.To, "Context", h.cfg.Context)}, nil
}

func planPark(h *handler, u *auth.User, s *calls.Snapshot, req *convReq) ([]ami.Message, error) {
	_, c, own, other, err := h.endpointConv(u, s, auth.Park, req.EndpointID, req.ConvID)
	if err != nil {
		return nil, err
	}
	if other == "" || !c.Connected {
		return nil, conflict("conversation %q has no connected party to park", req.ConvID)
	}
	// The other party is parked; it comes back to the endpoint on timeout.
	return []ami.Message{ami.NewAction(ami.ActionPark, "Channel", other, "TimeoutChannel", own)}, nil
}

func planPickupConv(h *handler, u *auth.User, s *calls.Snapshot, req *pickupConvReq) ([]ami.Message, error) {
	x, err := h.endpoint(u, s, auth.Pickup, "endpointId", req.EndpointID)
	if err != nil {
		return nil, err
	}
	dest, err := h.endpoint(u, s, auth.Pickup, "destId", req.DestID)
	if err != nil {
		return nil, err
	}
	ringing, caller := "", ""
	for id, c := range x.Conversations {
		if !c.Connected && c.Direction == "in" {
			if _, own, _, err := convOf(x, id); err == nil && (ringing == "" || own < ringing) {
				ringing, caller = own, c.CounterpartNum
			}
		}
	}
	if ringing == "" {
		return nil, conflict("extension %s has no ringing call to pick up", x.Exten)
	}
	// The picker's phone shows the caller it is about to talk to.
	if !h.dial.MatchString(caller) {
		caller = x.Exten
	}
	return []ami.Message{ami.NewAction(ami.ActionOriginate, append([]string{
		"Channel", h.dev(req.DestID), "Application", "PickupChan", "Data", ringing,
		"CallerID", req.DestID, "Account", caller, "Timeout", "30000", "Async", "true"}, h.autoAnswer(u, dest)...)...)}, nil
}

func planPickupParking(h *handler, u *auth.User, s *calls.Snapshot, req *pickupParkingReq) ([]ami.Message, error) {
	if err := h.checkNumber("parking", req.Parking); err != nil {
		return nil, err
	}
	dest, err := h.endpoint(u, s, auth.PickupParking, "destId", req.DestID)
	if err != nil {
		return nil, err
	}
	p, ok := s.Parkings[req.Parking]
	if !ok {
		return nil, notFound("parking %q does not exist", req.Parking)
	}
	if p.ParkedCaller == nil {
		return nil, conflict("parking %s is empty", req.Parking)
	}
	// Dialling the space retrieves the call (res_parking's parkedcalls
	// context, included in the phones' context). The account names the
	// space, as a call's names its number: the engine shows the picker's
	// ringing phone the parked caller waiting there.
	return []ami.Message{ami.NewAction(ami.ActionOriginate, append([]string{
		"Channel", h.dev(req.DestID), "Context", h.cfg.Context, "Exten", req.Parking, "Priority", "1",
		"CallerID", req.DestID, "Account", req.Parking, "Timeout", "30000", "Async", "true"}, h.autoAnswer(u, dest)...)...)}, nil
}

func planRecord(op string) func(h *handler, u *auth.User, s *calls.Snapshot, req *convReq) ([]ami.Message, error) {
	return func(h *handler, u *auth.User, s *calls.Snapshot, req *convReq) ([]ami.Message, error) {
		x, c, own, _, err := h.endpointConv(u, s, auth.Record, req.EndpointID, req.ConvID)
		if err != nil {
			return nil, err
		}
		recording := c.Recording == "true" || c.Recording == "mute"
		switch op {
		case "start":
			if recording {
				return nil, conflict("conversation %q is already being recorded", req.ConvID)
			}
			file := "ctibridge-" + h.cfg.Now().UTC().Format("20060102-150405") + "-" + x.Exten + "-" + safeFileChars(c.UniqueID) + ".wav"
			return []ami.Message{ami.NewAction(ami.ActionMixMonitor, "Channel", own, "File", file)}, nil
		case "stop":
			if !recording {
				return nil, conflict("conversation %q is not being recorded", req.ConvID)
			}
			return []ami.Message{ami.NewAction(ami.ActionStopMixMonitor, "Channel", own)}, nil
		}
		if !recording {
			return nil, conflict("conversation %q is not being recorded", req.ConvID)
		}
		state := "1"
		if op == "unmute" {
			state = "0"
		}
		return []ami.Message{ami.NewAction(ami.ActionMixMonitorMute, "Channel", own, "Direction", "both", "State", state)}, nil
	}
}

// safeFileChars keeps what may go in a file name: [0-9A-Za-z.-].
func safeFileChars(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '.' || r == '-' {
			return r
		}
		return -1
	}, s)
}

func planSpy(a auth.Action, opts string) func(h *handler, u *auth.User, s *calls.Snapshot, req *convDestReq) ([]ami.Message, error) {
	return func(h *handler, u *auth.User, s *calls.Snapshot, req *convDestReq) ([]ami.Message, error) {
		x, err := h.endpoint(u, s, a, "endpointId", req.EndpointID)
		if err != nil {
			return nil, err
		}
		dest, err := h.endpoint(u, s, a, "destId", req.DestID)
		if err != nil {
			return nil, err
		}
		_, own, _, err := convOf(x, req.ConvID)
		if err != nil {
			return nil, err
		}
		// ChanSpy(<channel>,<options>): q quiet, E leave when the spied
		// channel hangs up, B barge (talk to both parties), w whisper
		// (talk to the spied channel only).
		return []ami.Message{ami.NewAction(ami.ActionOriginate, append([]string{
			"Channel", h.dev(req.DestID), "Application", "ChanSpy", "Data", own + "," + opts,
			"CallerID", req.DestID, "Account", x.Exten, "Timeout", "30000", "Async", "true"}, h.autoAnswer(u, dest)...)...)}, nil
	}
}

func planDND(h *handler, u *auth.User, s *calls.Snapshot, req *dndReq) ([]ami.Message, error) {
	if req.Activate == nil {
		return nil, badRequest("activate (true or false) is required")
	}
	if _, err := h.endpoint(u, s, auth.SetDND, "endpointId", req.EndpointID); err != nil {
		return nil, err
	}
	return dndActions(req.EndpointID, *req.Activate), nil
}

// cfFamilies are FreePBX's AstDB families of call forwarding.
var cfFamilies = map[string]string{"unconditional": "CF", "busy": "CFB", "unavailable": "CFU"}

func planCF(h *handler, u *auth.User, s *calls.Snapshot, req *cfReq) ([]ami.Message, error) {
	fam, ok := cfFamilies[req.Type]
	if !ok {
		return nil, badRequest("type must be unconditional, busy or unavailable")
	}
	to := ""
	if req.To != nil {
		to = *req.To
	}
	if to != "" {
		if err := h.checkNumber("to", to); err != nil {
			return nil, err
		}
	}
	if _, err := h.endpoint(u, s, auth.SetCallForward, "endpointId", req.EndpointID); err != nil {
		return nil, err
	}
	return cfActions(fam, req.EndpointID, to), nil
}

func planQueueMember(op string) func(h *handler, u *auth.User, s *calls.Snapshot, req *queueMemberReq) ([]ami.Message, error) {
	return func(h *handler, u *auth.User, s *calls.Snapshot, req *queueMemberReq) ([]ami.Message, error) {
		if req.QueueID == "" {
			return nil, badRequest("queueId is required")
		}
		if len(req.Reason) > 128 {
			return nil, badRequest("reason longer than 128 bytes")
		}
		x, err := h.endpoint(u, s, auth.QueueMembership, "endpointId", req.EndpointID)
		if err != nil {
			return nil, err
		}
		name, _ := s.QueueName(req.QueueID)
		q, ok := s.Queues.Lookup(name)
		if !ok {
			return nil, notFound("queue %q does not exist", req.QueueID)
		}
		_, member := q.Members[x.Exten]
		iface := strings.NewReplacer("{tech}", h.cfg.ChanTech, "{exten}", x.Exten).Replace(h.cfg.QueueInterface)
		switch op {
		case "add":
			if member {
				return nil, conflict("%s is already a member of queue %s", x.Exten, q.Queue)
			}
			return []ami.Message{ami.NewAction(ami.ActionQueueAdd, "Queue", q.Queue, "Interface", iface,
				"Paused", "false", "MemberName", x.Name)}, nil
		}
		if !member {
			return nil, conflict("%s is not a member of queue %s", x.Exten, q.Queue)
		}
		switch op {
		case "remove":
			return []ami.Message{ami.NewAction(ami.ActionQueueRemove, "Queue", q.Queue, "Interface", iface)}, nil
		case "pause":
			m := ami.NewAction(ami.ActionQueuePause, "Interface", iface, "Queue", q.Queue, "Paused", "true")
			if req.Reason != "" {
				m = m.Add("Reason", req.Reason)
			}
			return []ami.Message{m}, nil
		}
		return []ami.Message{ami.NewAction(ami.ActionQueuePause, "Interface", iface, "Queue", q.Queue, "Paused", "false")}, nil
	}
}
