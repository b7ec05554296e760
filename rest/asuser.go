package rest

import (
	"context"
	"net/http"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
)

// What a front serving another API over this one (package nethcti, the
// NethCTI drop-in) uses: it checks its own credentials, then hands the
// request to this handler on behalf of the user, so every read, action,
// permission and privacy rule is this package's, applied once.

type asUserKey struct{}

// AsUser returns r carrying u as its signed-in user: the handler then
// serves r for u without looking for a bearer token. Only code in this
// process can set it; a client cannot.
func AsUser(r *http.Request, u *auth.User) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), asUserKey{}, u))
}

// userOf is the user AsUser put in r, or nil.
func userOf(r *http.Request) *auth.User {
	u, _ := r.Context().Value(asUserKey{}).(*auth.User)
	return u
}

// ConvChannels finds conversation convid (a raw id or the opaque one a
// filtered view shows) of extension x as the actions do, and returns it
// with x's own channel and the other party's ("" when none). Its errors
// are *Error (400, 409).
func ConvChannels(x calls.Extension, convid string) (c calls.Conversation, own, other string, err error) {
	return convOf(x, convid)
}

// WriteError sends err as the API's error JSON with the status toError
// gives it, and returns the status.
func WriteError(w http.ResponseWriter, r *http.Request, err error) int {
	return writeError(w, nil, r, err)
}
