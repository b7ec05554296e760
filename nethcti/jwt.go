package nethcti

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"time"
)

// NethCTI's tokens are HS256 JWTs (nethcti-middleware signs them with its
// secret; the web app decodes them for the "2fa" claim). This is the
// whole of HS256 the front needs: sign, and verify the signature and the
// expiry; no other algorithm is accepted.

// claims are what a token holds: nethcti-middleware's (id, 2fa,
// otp_verified, profile_id, iat, exp, aud) and ctibridge's own: jti names
// a persistent token, ses is the login session behind a token, sealed.
type claims struct {
	ID          string `json:"id"`
	TwoFA       bool   `json:"2fa"`
	OTPVerified bool   `json:"otp_verified"`
	ProfileID   string `json:"profile_id,omitempty"`
	IssuedAt    int64  `json:"iat"`
	Expires     int64  `json:"exp,omitempty"`
	Audience    string `json:"aud,omitempty"`
	JTI         string `json:"jti,omitempty"`
	Session     string `json:"ses,omitempty"`
}

// jwtHeader is the only header signed and accepted.
var jwtHeader = base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))

var (
	errBadJWT     = errors.New("nethcti: malformed or unsigned token")
	errExpiredJWT = errors.New("nethcti: token expired")
)

// keys are the HMAC key of the tokens and the AES key sealing the session
// inside them, both derived from the server secret.
type keys struct {
	mac  []byte
	seal cipher.AEAD
}

func newKeys(secret []byte) (*keys, error) {
	if len(secret) < 16 {
		return nil, errors.New("nethcti: the token secret must be at least 16 bytes")
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte("ctibridge nethcti jwt"))
	sk := hmac.New(sha256.New, secret)
	sk.Write([]byte("ctibridge nethcti seal"))
	block, err := aes.NewCipher(sk.Sum(nil))
	if err != nil {
		return nil, err
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &keys{mac: mac.Sum(nil), seal: gcm}, nil
}

func (k *keys) signature(signed string) string {
	m := hmac.New(sha256.New, k.mac)
	m.Write([]byte(signed))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// sign returns the JWT of c.
func (k *keys) sign(c claims) (string, error) {
	body, err := json.Marshal(c)
	if err != nil {
		return "", err
	}
	signed := jwtHeader + "." + base64.RawURLEncoding.EncodeToString(body)
	return signed + "." + k.signature(signed), nil
}

// verify checks tok's header, signature and expiry at now and returns its
// claims.
func (k *keys) verify(tok string, now time.Time) (claims, error) {
	var c claims
	head, rest, ok := strings.Cut(tok, ".")
	if !ok || head != jwtHeader {
		return c, errBadJWT
	}
	body, sig, ok := strings.Cut(rest, ".")
	if !ok || !hmac.Equal([]byte(sig), []byte(k.signature(tok[:len(head)+1+len(body)]))) {
		return c, errBadJWT
	}
	raw, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil || json.Unmarshal(raw, &c) != nil || c.ID == "" {
		return c, errBadJWT
	}
	if c.Expires != 0 && now.Unix() >= c.Expires {
		return c, errExpiredJWT
	}
	return c, nil
}

// sealText encrypts s (a session's access token) for a claim.
func (k *keys) sealText(s string) string {
	nonce := make([]byte, k.seal.NonceSize())
	rand.Read(nonce)
	return base64.RawURLEncoding.EncodeToString(k.seal.Seal(nonce, nonce, []byte(s), nil))
}

// openText decrypts a sealText.
func (k *keys) openText(s string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	n := k.seal.NonceSize()
	if err != nil || len(b) < n {
		return "", errBadJWT
	}
	out, err := k.seal.Open(nil, b[:n], b[n:], nil)
	if err != nil {
		return "", errBadJWT
	}
	return string(out), nil
}
