package ami

import (
	"crypto/md5"
	"crypto/subtle"
	"encoding/hex"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"
)

func (s *Session) challengeResp(req Message) Message {
	if !strings.EqualFold(req.Get("AuthType"), "md5") {
		return errorResp("Must specify AuthType")
	}
	if s.challenge == "" {
		s.challenge = strconv.FormatUint(uint64(rand.Uint32()), 10)
	}
	return NewMessage(Header{"Response", "Success"}, Header{"Challenge", s.challenge})
}

// login checks the credentials. A failure is answered and then the
// connection is closed, as Asterisk does.
func (s *Session) login(req Message) bool {
	user := req.Get("Username")
	secret, known := s.srv.cfg.Users[user]
	ok := false
	if known {
		if strings.EqualFold(req.Get("AuthType"), "md5") {
			if s.challenge != "" {
				sum := md5.Sum([]byte(s.challenge + secret))
				ok = subtle.ConstantTimeCompare([]byte(hex.EncodeToString(sum[:])), []byte(strings.ToLower(req.Get("Key")))) == 1
			}
		} else {
			ok = subtle.ConstantTimeCompare([]byte(secret), []byte(req.Get("Secret"))) == 1
		}
	}
	if !ok {
		s.srv.loginFail.Add(1)
		s.srv.log.Warn("ami login failed", "remote", s.nc.RemoteAddr().String(), "user", user)
		s.reply(req, []Message{errorResp("Authentication failed")})
		s.enqueue(outFrame{close: true})
		return true
	}
	s.Authorize(user, true)
	if ev, ok := req.Lookup("Events"); ok && ev != "" {
		s.events.Store(eventMask(ev))
	}
	s.reply(req, []Message{NewMessage(Header{"Response", "Success"}, Header{"Message", "Authentication accepted"})})
	if s.events.Load()&classSystem != 0 {
		up := secondsSince(time.Now(), s.srv.cfg.Started)
		s.Send(NewMessage(Header{"Event", EventFullyBooted}, Header{"Privilege", "system,all"},
			Header{"Uptime", up}, Header{"LastReload", up}, Header{"Status", "Fully Booted"}))
	}
	return true
}

func secondsSince(now, t time.Time) string {
	return strconv.FormatInt(int64(max(now.Sub(t), 0)/time.Second), 10)
}

// The event classes of manager.c's perms table, in its order and bits.
var eventClasses = []string{"system", "call", "log", "verbose", "command", "agent", "user",
	"config", "dtmf", "reporting", "cdr", "dialplan", "originate", "agi", "cc", "aoc", "test",
	"security", "message"}

const (
	classSystem = 1
	allClasses  = 1<<19 - 1
)

// eventMask reads an Events (login) or EventMask (Events action) value as
// manager.c's strings_to_mask: a number is the mask itself; on/yes/true
// every class, off/no/false none; else a comma-separated list of class
// names ("all" is every class).
func eventMask(v string) uint32 {
	v = strings.TrimSpace(v)
	if v == "" {
		return allClasses
	}
	if n, err := strconv.ParseUint(v, 10, 32); err == nil {
		return uint32(n) & allClasses
	}
	switch strings.ToLower(v) {
	case "no", "false", "n", "f", "off":
		return 0
	case "yes", "true", "y", "t", "on":
		return allClasses
	}
	var mask uint32
	for _, c := range strings.Split(v, ",") {
		c = strings.ToLower(strings.TrimSpace(c))
		if c == "all" {
			return allClasses
		}
		if i := slices.Index(eventClasses, c); i >= 0 {
			mask |= 1 << i
		}
	}
	return mask
}

// eventClass is the class bits of an event's Privilege header ("call,all":
// call; "all" is only the trailer every event carries).
func eventClass(privilege string) uint32 {
	var mask uint32
	for _, c := range strings.Split(privilege, ",") {
		if i := slices.Index(eventClasses, strings.ToLower(strings.TrimSpace(c))); i >= 0 {
			mask |= 1 << i
		}
	}
	return mask
}
