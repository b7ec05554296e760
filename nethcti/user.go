package nethcti

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"sync/atomic"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
	"github.com/ctibridge/ctibridge/sqldb"
)

// Users as NethCTI's clients read them: /user/me, the directory of
// /user/endpoints/all and /astproxy/opgroups, settings, avatars and the
// default device. They are made from the users set (auth) and the live
// state, and the front's Store.

// userNames maps extensions to the user owning them, for one users set.
type userNames struct {
	users  *auth.Users
	seq    string // numbers the sets seen, for the reads' ETags
	byExt  map[string]string
	groups map[string][]string // group → usernames, in file order
}

var namesSeq atomic.Uint64

// namesOf returns the map of the current users set, made once per set.
func (f *Front) namesOf() *userNames {
	us := f.auth.Users()
	if n := f.names.Load(); n != nil && n.users == us {
		return n
	}
	n := &userNames{users: us, seq: strconv.FormatUint(namesSeq.Add(1), 10), byExt: map[string]string{}, groups: map[string][]string{}}
	for _, u := range us.All() {
		for _, e := range u.Endpoints {
			if _, taken := n.byExt[e]; !taken {
				n.byExt[e] = u.Username
			}
		}
		for _, g := range u.Groups {
			n.groups[g] = append(n.groups[g], u.Username)
		}
	}
	f.names.Store(n)
	return n
}

// Username returns the user name of the user owning extension exten (the
// first such user of the users set), or "".
func (f *Front) Username(exten string) string { return f.namesOf().byExt[exten] }

func profileName(u *auth.User) string {
	if u.Profile != "" {
		return u.Profile
	}
	return u.Role.String()
}

type idJSON struct {
	ID string `json:"id"`
}

// extJSON is an extension endpoint: NethCTI's id and type, and the
// actions /user/me says the device takes from the CTI.
type extJSON struct {
	ID          string       `json:"id"`
	Type        string       `json:"type"`
	Description string       `json:"description"`
	Actions     *actionsJSON `json:"actions,omitempty"`
	ProxyPort   *int         `json:"proxy_port"`
}

type actionsJSON struct {
	Answer bool `json:"answer"`
	DTMF   bool `json:"dtmf"`
	Hold   bool `json:"hold"`
}

type endpointsJSON struct {
	Email         []idJSON  `json:"email"`
	Jabber        []idJSON  `json:"jabber"`
	Extension     []extJSON `json:"extension"`
	Cellphone     []idJSON  `json:"cellphone"`
	Voicemail     []idJSON  `json:"voicemail"`
	MainExtension []idJSON  `json:"mainextension"`
}

// userJSON is a user as /user/endpoints/all lists it.
type userJSON struct {
	Name                  string        `json:"name"`
	Username              string        `json:"username"`
	MainPresence          string        `json:"mainPresence"`
	Presence              string        `json:"presence"`
	PresenceOnBusy        string        `json:"presenceOnBusy"`
	PresenceOnUnavailable string        `json:"presenceOnUnavailable"`
	RecallOnBusy          string        `json:"recallOnBusy"`
	Endpoints             endpointsJSON `json:"endpoints"`
}

// meJSON is /user/me: the user's own, with its profile, default device
// and settings.
type meJSON struct {
	userJSON
	Profile       profileJSON                `json:"profile"`
	DefaultDevice *extJSON                   `json:"default_device"`
	Settings      map[string]json.RawMessage `json:"settings"`
}

// endpointType is an extension's NethCTI type.
func (f *Front) endpointType(exten string) string {
	if f.cfg.EndpointTypes != nil {
		if t := f.cfg.EndpointTypes(exten); t != "" {
			return t
		}
	}
	return "physical"
}

// userOf is u as NethCTI lists users; withActions adds what each device
// takes (the user's own /user/me).
func (f *Front) userOf(u *auth.User, s *calls.Snapshot, withActions bool) userJSON {
	j := userJSON{Name: u.Name, Username: u.Username, MainPresence: calls.PresenceOffline, Presence: calls.PresenceOnline,
		PresenceOnBusy: calls.PresenceOnline, PresenceOnUnavailable: calls.PresenceOnline, RecallOnBusy: "disabled",
		Endpoints: endpointsJSON{Email: []idJSON{}, Jabber: []idJSON{}, Extension: []extJSON{}, Cellphone: []idJSON{},
			Voicemail: []idJSON{}, MainExtension: []idJSON{}}}
	if j.Name == "" {
		j.Name = u.Username
	}
	if u.Cellphone != "" {
		j.Endpoints.Cellphone = append(j.Endpoints.Cellphone, idJSON{u.Cellphone})
	}
	for i, e := range u.Endpoints {
		x, ok := s.Extensions.Lookup(e)
		if i == 0 {
			j.Endpoints.MainExtension = append(j.Endpoints.MainExtension, idJSON{e})
			if ok {
				j.Presence, j.MainPresence = calls.PresenceOf(&x, u.Cellphone), calls.MainPresenceOf(&x, u.Cellphone)
			}
			if ok && x.Voicemail != nil {
				j.Endpoints.Voicemail = append(j.Endpoints.Voicemail, idJSON{e})
			}
		}
		ej := extJSON{ID: e, Type: f.endpointType(e)}
		if withActions {
			ej.Actions = f.deviceActions(ej.Type, x)
		}
		j.Endpoints.Extension = append(j.Endpoints.Extension, ej)
	}
	return j
}

// deviceActions says what the CTI can make a device do: a softphone
// (webrtc, mobile, nethlink) answers and holds itself on the CTI's word;
// a desk phone when an action URL is known for its user agent; DTMF goes
// through the PBX (PlayDTMF) for any device.
func (f *Front) deviceActions(typ string, x calls.Extension) *actionsJSON {
	if typ != "physical" {
		return &actionsJSON{Answer: true, DTMF: true, Hold: true}
	}
	p := f.phoneFor(x.SIPUserAgent)
	return &actionsJSON{Answer: f.cfg.Phone != nil && p != nil && p.urls[phoneAnswer] != "",
		DTMF: f.cfg.PBX != nil, Hold: f.cfg.Phone != nil && p != nil && p.urls[phoneHold] != ""}
}

// me serves GET /user/me.
func (f *Front) me(w http.ResponseWriter, r *http.Request, id Identity, _ bool) int {
	u := id.User
	settings, err := f.store.Settings(r.Context(), u.Username)
	if sqldb.IsUnavailable(err) {
		// The clients cannot start without /user/me: with the database
		// out of reach (or still migrating) the user has no settings and
		// the main extension is the default device, until it is back.
		settings, err = map[string]json.RawMessage{}, nil
	}
	if err != nil {
		return writeErr(w, r, err)
	}
	m := meJSON{userJSON: f.userOf(u, f.cfg.State.Snapshot(), true), Profile: profileOf(u), Settings: settings}
	def := ""
	if v, ok := settings["default_extension"]; ok {
		json.Unmarshal(v, &def)
	}
	for i, e := range m.Endpoints.Extension {
		if e.ID == def || def == "" && i == 0 {
			m.DefaultDevice = &m.Endpoints.Extension[i]
			break
		}
	}
	return writeJSON(w, http.StatusOK, m)
}

// endpointsAll serves GET /user/endpoints/all: every user by user name.
// Presence is public (as on the native API); other users' cellphones
// only for a user who sees every call's numbers.
func (f *Front) endpointsAll(w http.ResponseWriter, r *http.Request, id Identity, _ bool) int {
	s := f.cfg.State.Snapshot()
	full := auth.ViewOf(id.User).Full()
	out := map[string]userJSON{}
	for _, u := range f.auth.Users().All() {
		j := f.userOf(u, s, false)
		if !full && u != id.User {
			j.Endpoints.Cellphone = []idJSON{} // a number: only for those who see every call's
		}
		out[u.Username] = j
	}
	return writeJSON(w, http.StatusOK, out)
}

// opgroups serves GET /astproxy/opgroups: the users file's groups,
// {group: {users: [username]}}. An admin or a user with the operator
// panel sees every group, the others the groups they are in (NethCTI
// shows a profile's groups).
func (f *Front) opgroups(w http.ResponseWriter, r *http.Request, id Identity, _ bool) int {
	n := f.namesOf()
	all := auth.ViewOf(id.User).Full()
	out := map[string]any{}
	for g, users := range n.groups {
		if all || slices.Contains(id.User.Groups, g) {
			out[g] = map[string]any{"users": users}
		}
	}
	return writeJSON(w, http.StatusOK, out)
}

// allAvatars serves GET /user/all_avatars: {username: avatar} of the
// users who set one (settings "avatar").
func (f *Front) allAvatars(w http.ResponseWriter, r *http.Request, _ Identity, _ bool) int {
	m, err := f.store.SettingOfAll(r.Context(), "avatar")
	if err != nil {
		return writeErr(w, r, err)
	}
	return writeJSON(w, http.StatusOK, m)
}

// maxSetting bounds one setting's JSON (an avatar is a small image).
const maxSetting = 48 << 10

// settingsPost serves POST /user/settings: each key of the body object
// is stored as the user's setting.
func (f *Front) settingsPost(w http.ResponseWriter, r *http.Request, id Identity, _ bool) int {
	var req map[string]json.RawMessage
	if err := decodeLenient(w, r, &req); err != nil {
		return writeErr(w, r, err)
	}
	for k, v := range req {
		if k == "" || len(k) > 64 || len(v) > maxSetting {
			return writeErr(w, r, badRequest("setting names are 1 to 64 bytes, values at most 48 KiB"))
		}
	}
	for k, v := range req {
		if err := f.store.PutSetting(r.Context(), id.User.Username, k, v); err != nil {
			return writeErr(w, r, err)
		}
	}
	return writeJSON(w, http.StatusOK, struct{}{})
}

// settingDelete serves DELETE /user/setting/{prop}: the setting becomes
// null.
func (f *Front) settingDelete(w http.ResponseWriter, r *http.Request, id Identity, _ bool) int {
	if err := f.store.PutSetting(r.Context(), id.User.Username, r.PathValue("prop"), json.RawMessage("null")); err != nil {
		return writeErr(w, r, err)
	}
	return writeJSON(w, http.StatusOK, struct{}{})
}

// defaultDevice serves POST /user/default_device {id}: one of the user's
// own extensions.
func (f *Front) defaultDevice(w http.ResponseWriter, r *http.Request, id Identity, _ bool) int {
	var req struct {
		ID flexString `json:"id"`
	}
	if err := decodeLenient(w, r, &req); err != nil {
		return writeErr(w, r, err)
	}
	if !id.User.Owns(string(req.ID)) {
		return writeErr(w, r, apiError(http.StatusForbidden, "forbidden", "the default device must be one of your extensions"))
	}
	v, _ := json.Marshal(string(req.ID))
	if err := f.store.PutSetting(r.Context(), id.User.Username, "default_extension", v); err != nil {
		return writeErr(w, r, err)
	}
	if f.cfg.OnDefaultDevice != nil {
		f.cfg.OnDefaultDevice(id.User.Username, string(req.ID))
	}
	return writeJSON(w, http.StatusOK, struct{}{})
}
