package nethcti

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"time"
)

// Logins: both are the native login (POST /auth/login served in process:
// its users, directories, limits, refusal log and metrics), then turned
// into the credential the client expects.

type loginReq struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

// nativeSession is what the native login answers that the front keeps.
type nativeSession struct {
	Token     string `json:"token"`
	ExpiresAt int64  `json:"expiresAt"` // ms
	User      struct {
		Username string `json:"username"`
		Profile  string `json:"profile"`
	} `json:"user"`
}

// recorder keeps a native answer to read it back.
type recorder struct {
	hdr    http.Header
	status int
	body   bytes.Buffer
}

func newRecorder() *recorder { return &recorder{hdr: http.Header{}} }

func (c *recorder) Header() http.Header { return c.hdr }
func (c *recorder) WriteHeader(s int) {
	if c.status == 0 {
		c.status = s
	}
}
func (c *recorder) Write(b []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	return c.body.Write(b)
}

// copyTo sends the recorded answer to w as it is.
func (c *recorder) copyTo(w http.ResponseWriter) int {
	for k, v := range c.hdr {
		w.Header()[k] = v
	}
	w.WriteHeader(c.status)
	w.Write(c.body.Bytes())
	return c.status
}

// login runs the native login for the body's user; on failure it has
// answered w with the native error (401, 429, 503) and returns ok false.
// A main extension's number stands for its user, as in NethCTI.
func (f *Front) login(w http.ResponseWriter, r *http.Request) (req loginReq, s nativeSession, ok bool) {
	if err := decodeLenient(w, r, &req); err != nil {
		writeErr(w, r, err)
		return req, s, false
	}
	name := req.Username
	if _, known := f.auth.Users().Lookup(name); !known {
		if u := f.Username(name); u != "" {
			name = u
		}
	}
	body, _ := json.Marshal(loginReq{Username: name, Password: req.Password})
	rec := newRecorder()
	r2 := r.Clone(r.Context())
	r2.URL.Path, r2.URL.RawPath, r2.Method = "/auth/login", "", http.MethodPost
	r2.Body, r2.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	f.api.ServeHTTP(rec, r2)
	if rec.status != http.StatusOK || json.Unmarshal(rec.body.Bytes(), &s) != nil || s.Token == "" {
		rec.copyTo(w)
		return req, s, false
	}
	return req, s, true
}

// loginJWT serves POST /api/login: {"token": JWT}.
func (f *Front) loginJWT(w http.ResponseWriter, r *http.Request, _ Identity, _ bool) int {
	_, s, ok := f.login(w, r)
	if !ok {
		return http.StatusUnauthorized
	}
	tok, err := f.keys.sign(claims{ID: s.User.Username, ProfileID: s.User.Profile, IssuedAt: f.now().Unix(),
		Expires: s.ExpiresAt / 1000, Session: f.keys.sealText(s.Token)})
	if err != nil {
		return writeErr(w, r, err)
	}
	return writeJSON(w, http.StatusOK, map[string]any{"code": http.StatusOK, "expire": time.UnixMilli(s.ExpiresAt).UTC().Format(time.RFC3339), "token": tok})
}

// legacyToken is nethcti-server's token: HMAC-SHA1 keyed by the password
// (or the token a persistent token is made from) of "user:password:nonce",
// in hex.
func legacyToken(user, password, nonce string) string {
	m := hmac.New(sha1.New, []byte(password))
	m.Write([]byte(user + ":" + password + ":" + nonce))
	return hex.EncodeToString(m.Sum(nil))
}

func newNonce() string {
	var b [20]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// loginLegacy serves POST /webrest/authentication/login: a successful
// login answers 401 with "WWW-Authenticate: Digest <nonce>"; the client
// then sends "Authorization: <user>:<legacyToken(user, password, nonce)>".
// With "auth-exp: no-exp" the token is persistent (NethLink's).
func (f *Front) loginLegacy(w http.ResponseWriter, r *http.Request, _ Identity, _ bool) int {
	req, s, ok := f.login(w, r)
	if !ok {
		return http.StatusUnauthorized
	}
	nonce := newNonce()
	tok := legacyToken(req.Username, req.Password, nonce)
	if r.Header.Get("auth-exp") == "no-exp" {
		if err := f.putPersistent(r.Context(), s.User.Username, "legacy:no-exp", tok); err != nil {
			return writeErr(w, r, err)
		}
		f.auth.Logout(s.Token) // the persistent token stands alone
		f.log.Info("persistent token issued", "user", s.User.Username, "audience", "legacy:no-exp")
	} else {
		f.addLegacy(tok, req.Username, s.User.Username, s.Token)
	}
	w.Header().Set("WWW-Authenticate", "Digest "+nonce)
	w.WriteHeader(http.StatusUnauthorized)
	return http.StatusUnauthorized
}

// logout ends the session behind the credential (a persistent token is
// left: it is revoked by its own route). NethCTI's legacy logout with
// "auth-exp: no-exp" revokes the NethLink persistent token.
func (f *Front) logout(w http.ResponseWriter, r *http.Request, id Identity, legacy bool) int {
	if id.Session != "" {
		f.auth.Logout(id.Session)
		f.dropSession(id.Session)
	} else if legacy && r.Header.Get("auth-exp") == "no-exp" {
		if err := f.dropPersistent(r.Context(), id.User.Username, "legacy:no-exp"); err != nil {
			return writeErr(w, r, err)
		}
	}
	if legacy {
		w.WriteHeader(http.StatusOK)
		return http.StatusOK
	}
	return writeJSON(w, http.StatusOK, map[string]any{"code": http.StatusOK})
}

// audiences are nethcti-middleware's persistent token audiences.
var audiences = map[string]bool{"phone-island": true, "mobile-app": true, "nethlink": true}

func audienceOf(r *http.Request) (string, error) {
	a := strings.ToLower(strings.TrimSpace(r.PathValue("audience")))
	if !audiences[a] {
		return "", badRequest("audience must be phone-island, mobile-app or nethlink")
	}
	return a, nil
}

// persistentJWT issues (replacing the one before) the user's JWT of an
// audience: it expires in 100 years, as nethcti-middleware's.
func (f *Front) persistentJWT(r *http.Request, id Identity, audience string) (string, error) {
	now := f.now()
	tok, err := f.keys.sign(claims{ID: id.User.Username, ProfileID: profileName(id.User), IssuedAt: now.Unix(),
		Expires: now.AddDate(100, 0, 0).Unix(), Audience: audience, JTI: newNonce()})
	if err != nil {
		return "", err
	}
	if err := f.putPersistent(r.Context(), id.User.Username, audience, tok); err != nil {
		return "", err
	}
	f.log.Info("persistent token issued", "user", id.User.Username, "audience", audience)
	return tok, nil
}

// tokenCreate serves POST /api/tokens/persistent/{audience}.
func (f *Front) tokenCreate(w http.ResponseWriter, r *http.Request, id Identity, _ bool) int {
	a, err := audienceOf(r)
	if err != nil {
		return writeErr(w, r, err)
	}
	tok, err := f.persistentJWT(r, id, a)
	if err != nil {
		return writeErr(w, r, err)
	}
	return writeJSON(w, http.StatusOK, map[string]string{"token": tok})
}

// tokenCheck serves GET /api/tokens/persistent/{audience}: {"exists"}.
func (f *Front) tokenCheck(w http.ResponseWriter, r *http.Request, id Identity, _ bool) int {
	a, err := audienceOf(r)
	if err != nil {
		return writeErr(w, r, err)
	}
	return writeJSON(w, http.StatusOK, map[string]bool{"exists": f.hasPersistent(id.User.Username, a)})
}

// tokenRemove serves DELETE /api/tokens/persistent/{audience}: 204.
func (f *Front) tokenRemove(w http.ResponseWriter, r *http.Request, id Identity, _ bool) int {
	a, err := audienceOf(r)
	if err != nil {
		return writeErr(w, r, err)
	}
	if err := f.dropPersistent(r.Context(), id.User.Username, a); err != nil {
		return writeErr(w, r, err)
	}
	f.log.Info("persistent token revoked", "user", id.User.Username, "audience", a)
	w.WriteHeader(http.StatusNoContent)
	return http.StatusNoContent
}

// islandAudience maps the legacy routes' subtype to an audience
// (nethcti-middleware's mapping: nethlink, else phone-island); under
// /webrest the token is of the legacy scheme.
func islandAudience(subtype string, legacy bool) string {
	a := "phone-island"
	if strings.EqualFold(strings.TrimSpace(subtype), "nethlink") {
		a = "nethlink"
	}
	if legacy {
		return "legacy:" + a
	}
	return a
}

// islandLogin serves POST authentication/phone_island_token_login: under
// /webrest {token, username}, a legacy token made as nethcti-server does
// (from the caller's token and a nonce, for "<user>_phone-island"); under
// /api {token}, a persistent JWT.
func (f *Front) islandLogin(w http.ResponseWriter, r *http.Request, id Identity, legacy bool) int {
	var req struct {
		Subtype string `json:"subtype"`
	}
	decodeLenient(w, r, &req) // an empty or bad body means phone-island
	a := islandAudience(req.Subtype, legacy)
	if !legacy {
		tok, err := f.persistentJWT(r, id, a)
		if err != nil {
			return writeErr(w, r, err)
		}
		return writeJSON(w, http.StatusOK, map[string]string{"token": tok})
	}
	_, caller, _ := strings.Cut(r.Header.Get("Authorization"), ":")
	tok := legacyToken(id.User.Username+"_phone-island", caller, newNonce())
	if err := f.putPersistent(r.Context(), id.User.Username, a, tok); err != nil {
		return writeErr(w, r, err)
	}
	f.log.Info("persistent token issued", "user", id.User.Username, "audience", a)
	return writeJSON(w, http.StatusOK, map[string]string{"token": tok, "username": id.User.Username})
}

// islandCheck serves GET authentication/phone_island_token_check[/{subtype}].
func (f *Front) islandCheck(w http.ResponseWriter, r *http.Request, id Identity, legacy bool) int {
	a := islandAudience(r.PathValue("subtype"), legacy)
	return writeJSON(w, http.StatusOK, map[string]bool{"exists": f.hasPersistent(id.User.Username, a)})
}

// islandRemove serves POST authentication/persistent_token_remove
// ({type: phone-island|no-exp} legacy, {subtype} under /api).
func (f *Front) islandRemove(w http.ResponseWriter, r *http.Request, id Identity, legacy bool) int {
	var req struct {
		Type    string `json:"type"`
		Subtype string `json:"subtype"`
	}
	decodeLenient(w, r, &req)
	a := islandAudience(req.Subtype, legacy)
	if legacy && req.Type == "no-exp" {
		a = "legacy:no-exp"
	}
	if err := f.dropPersistent(r.Context(), id.User.Username, a); err != nil {
		return writeErr(w, r, err)
	}
	f.log.Info("persistent token revoked", "user", id.User.Username, "audience", a)
	if !legacy {
		w.WriteHeader(http.StatusNoContent)
		return http.StatusNoContent
	}
	return writeJSON(w, http.StatusOK, struct{}{})
}
