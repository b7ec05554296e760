package auth

import (
	"errors"
	"fmt"
	"sync"

	"golang.org/x/crypto/bcrypt"
)

// DefaultCost is the bcrypt cost of HashPassword: bcrypt's default (10,
// about 50-100 ms of one core), which also bounds how fast a stolen users
// file can be attacked.
const DefaultCost = bcrypt.DefaultCost

// ErrPasswordTooLong: bcrypt uses only the first 72 bytes, so longer
// passwords are refused rather than silently truncated.
var ErrPasswordTooLong = errors.New("auth: password longer than 72 bytes")

// ErrEmptyPassword is returned for an empty password.
var ErrEmptyPassword = errors.New("auth: empty password")

// HashPassword returns the bcrypt hash of password at cost (0 means
// DefaultCost), for the users file's password_hash.
func HashPassword(password string, cost int) (string, error) {
	if password == "" {
		return "", ErrEmptyPassword
	}
	if len(password) > 72 {
		return "", ErrPasswordTooLong
	}
	if cost == 0 {
		cost = DefaultCost
	}
	h, err := bcrypt.GenerateFromPassword([]byte(password), cost)
	if err != nil {
		return "", fmt.Errorf("auth: hash password: %w", err)
	}
	return string(h), nil
}

// checkPassword reports whether password matches hash.
func checkPassword(hash, password string) bool {
	return bcrypt.CompareHashAndPassword([]byte(hash), []byte(password)) == nil
}

// dummyHashes are compared against when the user does not exist, so that
// an unknown user name takes as long as a wrong password (no user-name
// enumeration by timing). One per cost, made on first use.
var dummyHashes sync.Map // int -> string

func dummyHash(cost int) string {
	if h, ok := dummyHashes.Load(cost); ok {
		return h.(string)
	}
	h, err := bcrypt.GenerateFromPassword([]byte("ctibridge-no-such-user"), cost)
	if err != nil {
		h, _ = bcrypt.GenerateFromPassword([]byte("ctibridge-no-such-user"), DefaultCost)
	}
	dummyHashes.Store(cost, string(h))
	return string(h)
}

// PasswordChecker checks a user's password somewhere else than the users
// file: a directory (LDAP bind). CheckPassword returns nil,
// ErrBadCredentials, or ErrDirectoryUnavailable when it cannot tell (the
// directory is down and no recent login of that user is cached).
type PasswordChecker interface {
	CheckPassword(username, password string) error
}

// ErrDirectoryUnavailable: the user's directory cannot check passwords now
// (callers answer 503); the login did not count as a failure.
var ErrDirectoryUnavailable = errors.New("auth: the user directory is unavailable")
