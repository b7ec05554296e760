package rest

import (
	"net/http"
	"slices"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
)

// Call forwarding, DND, voicemail counters and user presence, NethCTI's
// routes: GET astproxy/cfcall/{type}/{endpoint}, astproxy/dnd/{endpoint},
// voicemail/new_counters, user/presence, user/presencelist and POST
// user/presence. They read the extension as the engine shows it (AstDB
// read at resync, on a period and after every change made here); the
// POST stores the presence where FreePBX does, through AMI (DND/<ext>,
// Custom:DND<ext>, CF/<ext> of the user's main extension).

// Refresher re-reads PBX state after an action changed it; *link.Link
// satisfies it. Refresh must not block.
type Refresher interface {
	Refresh(actions ...ami.Message) bool
}

func (h *handler) registerPresence() {
	h.handle("GET /astproxy/cfcall/{type}/{endpoint}", false, h.seenID("endpoint", h.getCF))
	h.handle("GET /astproxy/dnd/{endpoint}", false, h.seenID("endpoint", h.getDND))
	h.handle("GET /voicemail/new_counters", false, h.byPBX(resVoicemail, h.getVoicemailCounters))
	h.handle("GET /user/presence", false, h.getPresence)
	h.handle("GET /user/presencelist", false, h.getPresenceList)
	h.handle("POST /user/presence", false, h.action(act("presence", planPresence)))
}

// onOff is NethCTI's "status" of a forward or DND.
func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

// extensionOf is the extension a read names; presence is never hidden, so
// any signed-in user may read any extension's.
func (h *handler) extensionOf(r *http.Request, field string) (calls.Extension, error) {
	id := r.PathValue(field)
	if err := auth.CheckEndpoint(id); err != nil {
		return calls.Extension{}, badRequest("%s: %v", field, err)
	}
	x, ok := h.state.Snapshot().Extensions.Lookup(id)
	if !ok {
		return calls.Extension{}, notFound("extension %q does not exist", id)
	}
	return x, nil
}

type cfJSON struct {
	Exten  string `json:"exten"`
	Status string `json:"status"`
	Type   string `json:"type"`
	To     string `json:"to,omitempty"`
}

func (h *handler) getCF(w http.ResponseWriter, r *http.Request, _ *auth.User) int {
	typ := r.PathValue("type")
	if _, ok := cfFamilies[typ]; !ok {
		return writeError(w, h.log, r, badRequest("type must be unconditional, busy or unavailable"))
	}
	x, err := h.extensionOf(r, "endpoint")
	if err != nil {
		return writeError(w, h.log, r, err)
	}
	to := map[string]string{"unconditional": x.CF, "busy": x.CFB, "unavailable": x.CFU}[typ]
	return writeJSON(w, http.StatusOK, cfJSON{Exten: x.Exten, Status: onOff(to != ""), Type: typ, To: to})
}

type dndJSON struct {
	Exten  string `json:"exten"`
	Status string `json:"status"`
}

func (h *handler) getDND(w http.ResponseWriter, r *http.Request, _ *auth.User) int {
	x, err := h.extensionOf(r, "endpoint")
	if err != nil {
		return writeError(w, h.log, r, err)
	}
	return writeJSON(w, http.StatusOK, dndJSON{Exten: x.Exten, Status: onOff(x.DND)})
}

// vmCounters is new_counters' body, made once per snapshot.
type vmCounters struct {
	snap *calls.Snapshot
	e    *entry
}

// getVoicemailCounters answers {"204":{"newMessageCount":1},...}: every
// extension whose mailbox the PBX reported, as NethCTI does.
func (h *handler) getVoicemailCounters(w http.ResponseWriter, r *http.Request, _ *auth.User) int {
	vc := h.current()
	c := h.vmCounters.Load()
	if c == nil || c.snap != vc.snap {
		c = &vmCounters{snap: vc.snap, e: newEntry(voicemailJSON(vc.snap, nil))}
		h.vmCounters.Store(c)
	}
	return h.write(w, r, vc, c.e)
}

// voicemailJSON is new_counters' body of the extensions keep keeps (nil:
// all).
func voicemailJSON(s *calls.Snapshot, keep func(string) bool) []byte {
	return jsonObject(s.Extensions.Keys(), func(k string) []byte {
		v := s.Extensions.Get(k).Voicemail
		if v == nil || keep != nil && !keep(k) {
			return nil
		}
		return append(appendInt(append([]byte(nil), `{"newMessageCount":`...), v.New), '}')
	})
}

func appendInt(b []byte, n int) []byte {
	if n < 0 {
		b, n = append(b, '-'), -n
	}
	var d [20]byte
	i := len(d)
	for {
		i--
		d[i] = byte('0' + n%10)
		if n /= 10; n == 0 {
			break
		}
	}
	return append(b, d[i:]...)
}

// presenceBodies are the possible GET user/presence bodies, made once, by
// presence and main presence.
var presenceBodies = func() map[[2]string]*entry {
	m := map[[2]string]*entry{}
	for _, p := range calls.PresenceChoices {
		for _, main := range []string{p, calls.PresenceBusy, calls.PresenceRinging, calls.PresenceOffline} {
			m[[2]string{p, main}] = newEntry([]byte(`{"status":"` + p + `","mainPresence":"` + main + `"}`))
		}
	}
	return m
}()

// mainExtension is the user's main extension: the first it owns.
func mainExtension(u *auth.User) (string, error) {
	if len(u.Endpoints) == 0 {
		return "", conflict("%s has no extension, so no presence", u.Username)
	}
	return u.Endpoints[0], nil
}

// getPresence answers {"status":"online|dnd|voicemail|cellphone|
// callforward","mainPresence":"...|busy|ringing|offline"} for the user's
// main extension.
func (h *handler) getPresence(w http.ResponseWriter, r *http.Request, u *auth.User) int {
	ext, err := mainExtension(u)
	if err != nil {
		return writeError(w, h.log, r, err)
	}
	vc := h.current()
	x, ok := vc.snap.Extensions.Lookup(ext)
	if !ok {
		return writeError(w, h.log, r, notFound("extension %q does not exist", ext))
	}
	key := [2]string{calls.PresenceOf(&x, u.Cellphone), calls.MainPresenceOf(&x, u.Cellphone)}
	return h.write(w, r, vc, presenceBodies[key])
}

// getPresenceList answers the presences the user may choose; cellphone
// only when the users file gives the user one.
func (h *handler) getPresenceList(w http.ResponseWriter, r *http.Request, u *auth.User) int {
	list := calls.PresenceChoices
	if u.Cellphone == "" {
		list = slices.DeleteFunc(slices.Clone(list), func(p string) bool { return p == calls.PresenceCellphone })
	}
	return writeJSON(w, http.StatusOK, list)
}

type presenceReq struct {
	Status string `json:"status"`
	To     string `json:"to"` // callforward only
}

// planPresence sets the presence on the PBX: DND on or off, and the
// unconditional forward to nothing, the voicemail, the cellphone or "to".
func planPresence(h *handler, u *auth.User, s *calls.Snapshot, req *presenceReq) ([]ami.Message, error) {
	if !slices.Contains(calls.PresenceChoices, req.Status) {
		return nil, badRequest("status must be one of online, dnd, voicemail, cellphone, callforward")
	}
	ext, err := mainExtension(u)
	if err != nil {
		return nil, err
	}
	if _, err := h.endpoint(u, s, auth.SetDND, "endpoint", ext); err != nil {
		return nil, err
	}
	if _, err := h.endpoint(u, s, auth.SetCallForward, "endpoint", ext); err != nil {
		return nil, err
	}
	to := ""
	switch req.Status {
	case calls.PresenceVoicemail:
		to = calls.VoicemailTarget(ext)
	case calls.PresenceCellphone:
		if to = u.Cellphone; to == "" {
			return nil, conflict("%s has no cellphone in the users file", u.Username)
		}
	case calls.PresenceCallforward:
		if req.To == "" {
			return nil, badRequest("to is required for callforward")
		}
		if err := h.checkNumber("to", req.To); err != nil {
			return nil, err
		}
		to = req.To
	}
	msgs := dndActions(ext, req.Status == calls.PresenceDND)
	return append(msgs, cfActions("CF", ext, to)...), nil
}

// dndActions sets or clears FreePBX's DND of ext: AstDB DND/<ext> = YES and
// the custom device state Custom:DND<ext> (BUSY when on), which its *76
// feature code sets too: the PBX then emits DeviceStateChange.
func dndActions(ext string, on bool) []ami.Message {
	set, state := ami.NewAction(ami.ActionDBDel, "Family", "DND", "Key", ext), "NOT_INUSE"
	if on {
		set, state = ami.NewAction(ami.ActionDBPut, "Family", "DND", "Key", ext, "Val", "YES"), "BUSY"
	}
	return []ami.Message{set, ami.NewAction(ami.ActionSetvar, "Variable", "DEVICE_STATE(Custom:DND"+ext+")", "Value", state)}
}

// cfActions sets the forward of AstDB family fam (CF, CFB, CFU) of ext to
// to, or deletes it when to is "".
func cfActions(fam, ext, to string) []ami.Message {
	if to == "" {
		return []ami.Message{ami.NewAction(ami.ActionDBDel, "Family", fam, "Key", ext)}
	}
	return []ami.Message{ami.NewAction(ami.ActionDBPut, "Family", fam, "Key", ext, "Val", to)}
}

// refreshAfter asks the link to read back the AstDB keys an action wrote,
// so every screen shows the change without waiting for the periodic
// refresh (AstDB raises no event).
func (h *handler) refreshAfter(ref Refresher, msgs []ami.Message) {
	if ref == nil {
		return
	}
	var exts []string
	for _, m := range msgs {
		a := m.Action()
		if a == ami.ActionConfbridgeLock || a == ami.ActionConfbridgeUnlock {
			// No event says a room was locked: read the rooms back.
			if !ref.Refresh(ami.NewAction(ami.ActionConfbridgeListRooms)) {
				h.log.Warn("refresh after an action dropped: the change shows at the next periodic refresh", "conference", m.Get("Conference"))
			}
			continue
		}
		if a != ami.ActionDBPut && a != ami.ActionDBDel {
			continue
		}
		if k := m.Get("Key"); !slices.Contains(exts, k) {
			exts = append(exts, k)
		}
	}
	for _, x := range exts {
		if !ref.Refresh(calls.ForwardRefresh(x)...) {
			h.log.Warn("refresh after an action dropped: the change shows at the next periodic refresh", "extension", x)
		}
	}
}
