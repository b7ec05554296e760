package sio

import (
	"errors"
	"sync/atomic"

	"github.com/ctibridge/ctibridge/auth"
)

// UsersDirectory is a Directory over the users users returns (e.g.
// (*auth.Service).Users: the users file and the directories), indexed by
// extension again whenever that set changes. An extension several users
// own is the one's whose main extension it is, else the first's by name.
func UsersDirectory(users func() *auth.Users) Directory {
	return &usersDir{users: users}
}

type usersDir struct {
	users func() *auth.Users
	idx   atomic.Pointer[extIndex]
}

type extIndex struct {
	of     *auth.Users
	byExt  map[string]*auth.User
	isMain map[string]bool
}

func (d *usersDir) UserOf(exten string) (*auth.User, bool) {
	us := d.users()
	idx := d.idx.Load()
	if idx == nil || idx.of != us {
		idx = indexUsers(us)
		d.idx.Store(idx)
	}
	u, ok := idx.byExt[exten]
	return u, ok
}

func indexUsers(us *auth.Users) *extIndex {
	idx := &extIndex{of: us, byExt: map[string]*auth.User{}, isMain: map[string]bool{}}
	if us == nil {
		return idx
	}
	for _, u := range us.All() {
		for i, e := range u.Endpoints {
			main := i == 0
			if _, ok := idx.byExt[e]; ok && (idx.isMain[e] || !main) {
				continue
			}
			idx.byExt[e], idx.isMain[e] = u, main
		}
	}
	return idx
}

// NativeLogin checks a socket login against ctibridge's own tokens
// (auth.Service.Authenticate): accessKeyId must name the token's user, by
// username or by one of its extensions. Its session's revocation ends
// the client (Revoker).
type NativeLogin struct{ *auth.Service }

// ErrWrongUser is a token that is not the one of the user the login
// names.
var ErrWrongUser = errors.New("sio: the token is another user's")

// CheckLogin implements Authenticator: the token is its own session.
func (n NativeLogin) CheckLogin(accessKeyID, token string) (Login, error) {
	u, exp, err := n.Authenticate(token)
	if err != nil {
		return Login{}, err
	}
	if accessKeyID != u.Username && !u.Owns(accessKeyID) {
		return Login{}, ErrWrongUser
	}
	return Login{User: u, Expires: exp, Session: token}, nil
}
