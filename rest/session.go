package rest

import (
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/ctibridge/ctibridge/auth"
)

type loginRequest struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

// meJSON is the answer of GET /user/me and the "user" of a login.
type meJSON struct {
	Username    string   `json:"username"`
	Name        string   `json:"name"`
	Role        string   `json:"role"`
	Endpoints   []string `json:"endpoints"`
	Groups      []string `json:"groups"`
	Permissions []string `json:"permissions"`
	// Scope lists the endpoints the user may act on; null means all (admin).
	Scope []string `json:"scope"`
	// SeesAllCalls: the numbers and names of every call are visible.
	SeesAllCalls bool `json:"seesAllCalls"`
	// Actions lists what the user may do on its scope (auth.Action names).
	Actions []string `json:"actions"`
	// Profile names the user's capability set; Capabilities lists it
	// (with what extra permissions add).
	Profile      string   `json:"profile"`
	Capabilities []string `json:"capabilities"`
	// PopupLink is the customer card's URL template (Config.PopupLink);
	// Mobiles the extensions transfer_cellphone can reach. GET /user/me
	// only.
	PopupLink string   `json:"popupLink,omitempty"`
	Mobiles   []string `json:"mobiles,omitempty"`
}

func meOf(u *auth.User) meJSON {
	nonNil := func(s []string) []string {
		if s == nil {
			return []string{}
		}
		return slices.Clone(s)
	}
	m := meJSON{
		Username: u.Username, Name: u.Name, Role: u.Role.String(),
		Endpoints: nonNil(u.Endpoints), Groups: nonNil(u.Groups), Permissions: nonNil(u.Permissions),
		Scope: u.Scope(), SeesAllCalls: auth.ViewOf(u).Full(), Actions: []string{},
		Profile: u.Profile, Capabilities: u.Caps().Names(),
	}
	if m.Profile == "" {
		m.Profile = u.Role.String()
	}
	if m.Scope == nil && u.Role != auth.RoleAdmin {
		m.Scope = []string{}
	}
	probe := ""
	if len(u.Endpoints) > 0 {
		probe = u.Endpoints[0]
	}
	for _, a := range auth.Actions() {
		if a == auth.SeeCalls {
			continue
		}
		if auth.Allowed(u, a, probe) {
			m.Actions = append(m.Actions, a.String())
		}
	}
	return m
}

func (h *handler) login(w http.ResponseWriter, r *http.Request, _ *auth.User) int {
	var req loginRequest
	if err := decode(w, r, &req); err != nil {
		return writeError(w, h.log, r, err)
	}
	if req.Username == "" || req.Password == "" {
		return writeError(w, h.log, r, badRequest("username and password are required"))
	}
	addr := clientAddr(r, h.cfg.TrustedProxies)
	sess, err := h.auth.Login(req.Username, req.Password, addr)
	if err != nil {
		h.loginRefused(req.Username, addr, err)
		return writeError(w, h.log, r, err)
	}
	return writeJSON(w, http.StatusOK, sessionAnswer(sess))
}

// loginJSON is the answer of a login and of a refresh.
type loginJSON struct {
	Token            string `json:"token"`
	ExpiresAt        int64  `json:"expiresAt"`
	RefreshToken     string `json:"refreshToken"`
	RefreshExpiresAt int64  `json:"refreshExpiresAt"`
	SessionID        string `json:"sessionId"`
	User             meJSON `json:"user"`
}

func sessionAnswer(s auth.Session) loginJSON {
	return loginJSON{Token: s.Token, ExpiresAt: s.ExpiresAt.UnixMilli(), RefreshToken: s.RefreshToken,
		RefreshExpiresAt: s.RefreshExpiresAt.UnixMilli(), SessionID: s.ID, User: meOf(s.User)}
}

// refresh spends a refresh token for a new session (public: the access
// token may have expired).
func (h *handler) refresh(w http.ResponseWriter, r *http.Request, _ *auth.User) int {
	var req struct {
		RefreshToken string `json:"refreshToken"`
	}
	if err := decode(w, r, &req); err != nil {
		return writeError(w, h.log, r, err)
	}
	if req.RefreshToken == "" {
		return writeError(w, h.log, r, badRequest("refreshToken is required"))
	}
	sess, err := h.auth.Refresh(req.RefreshToken, clientAddr(r, h.cfg.TrustedProxies))
	if err != nil {
		return writeError(w, h.log, r, err)
	}
	return writeJSON(w, http.StatusOK, sessionAnswer(sess))
}

// sessionJSON is one session in GET /auth/sessions.
type sessionJSON struct {
	ID               string `json:"id"`
	Username         string `json:"username"`
	CreatedAt        int64  `json:"createdAt"`
	ExpiresAt        int64  `json:"expiresAt"`
	RefreshExpiresAt int64  `json:"refreshExpiresAt,omitempty"`
	ClientAddr       string `json:"clientAddr"`
	Current          bool   `json:"current"`
}

// sessionsOf is whose sessions u may list and revoke: everyone's for a
// user manager (""), otherwise its own.
func sessionsOf(u *auth.User) string {
	if auth.Allowed(u, auth.ManageUsers, "") {
		return ""
	}
	return u.Username
}

func (h *handler) listSessions(w http.ResponseWriter, r *http.Request, u *auth.User) int {
	who := sessionsOf(u)
	if q := r.URL.Query().Get("username"); q != "" {
		if who != "" && q != who {
			return writeError(w, h.log, r, forbidden("only an admin lists other users' sessions"))
		}
		who = q
	}
	tok, _ := bearer(r)
	cur := h.auth.SessionID(tok)
	out := []sessionJSON{}
	for _, s := range h.auth.Sessions(who) {
		j := sessionJSON{ID: s.ID, Username: s.Username, CreatedAt: s.Created.UnixMilli(), ExpiresAt: s.Expires.UnixMilli(),
			ClientAddr: s.ClientAddr, Current: s.ID == cur}
		if !s.RefreshExp.IsZero() {
			j.RefreshExpiresAt = s.RefreshExp.UnixMilli()
		}
		out = append(out, j)
	}
	return writeJSON(w, http.StatusOK, out)
}

// revokeSessions ends one session (id) or every session of a user
// (username); a user may end its own, an admin anyone's.
func (h *handler) revokeSessions(w http.ResponseWriter, r *http.Request, u *auth.User) int {
	var req struct {
		ID       string `json:"id"`
		Username string `json:"username"`
	}
	if err := decode(w, r, &req); err != nil {
		return writeError(w, h.log, r, err)
	}
	if (req.ID == "") == (req.Username == "") {
		return writeError(w, h.log, r, badRequest("give either id (one session) or username (all of a user's sessions)"))
	}
	who := sessionsOf(u)
	n := 0
	switch {
	case req.ID != "":
		if !h.auth.RevokeSession(req.ID, who) {
			return writeError(w, h.log, r, notFound("no session %q of yours", req.ID))
		}
		n = 1
	default:
		if who != "" && req.Username != who {
			return writeError(w, h.log, r, forbidden("only an admin revokes other users' sessions"))
		}
		n = h.auth.RevokeUser(req.Username)
	}
	h.log.Info("sessions revoked", "by", u.Username, "id", req.ID, "user", req.Username, "count", n)
	return writeJSON(w, http.StatusOK, struct {
		Revoked int `json:"revoked"`
	}{n})
}

// loginRefused counts a refused login and logs it, at most one line per
// refusalLogEvery (the others are counted in the next line's "suppressed").
func (h *handler) loginRefused(username, addr string, err error) {
	reason := "bad_credentials"
	var rl *auth.RateLimitError
	if errors.As(err, &rl) {
		reason = rl.By
	} else if !errors.Is(err, auth.ErrBadCredentials) {
		return // not a refusal: an internal error, logged by writeError
	}
	h.metrics.refused(reason)
	now := time.Now()
	h.refusalMu.Lock()
	if now.Sub(h.refusalAt) < refusalLogEvery {
		h.refusalQuiet++
		h.refusalMu.Unlock()
		return
	}
	quiet := h.refusalQuiet
	h.refusalAt, h.refusalQuiet = now, 0
	h.refusalMu.Unlock()
	if len(username) > 64 {
		username = username[:64] + "..."
	}
	h.log.Warn("login refused", "reason", reason, "user", username, "remote", addr, "suppressed", quiet)
}

// refusalLogEvery spaces the "login refused" log lines: a guessing attack
// must not flood the log.
const refusalLogEvery = time.Second

func (h *handler) logout(w http.ResponseWriter, r *http.Request, _ *auth.User) int {
	tok, _ := bearer(r)
	h.auth.Logout(tok)
	return writeJSON(w, http.StatusOK, struct{}{})
}
