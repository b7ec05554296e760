package pbxsim

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/ami/amievent"
	"github.com/emiago/sipgo/sip"
	"github.com/icholy/digest"
)

func rand32(b []byte) { rand.Read(b) }

// nonce is stateless: a timestamp and its HMAC, valid for a few minutes.
func (p *PBX) nonce() string {
	ts := strconv.FormatInt(p.cfg.Now().Unix(), 16)
	m := hmac.New(sha256.New, p.nonceKey[:])
	m.Write([]byte(ts))
	return ts + "." + hex.EncodeToString(m.Sum(nil)[:12])
}

func (p *PBX) nonceValid(n string) bool {
	ts, sum, ok := strings.Cut(n, ".")
	if !ok {
		return false
	}
	m := hmac.New(sha256.New, p.nonceKey[:])
	m.Write([]byte(ts))
	if !hmac.Equal([]byte(hex.EncodeToString(m.Sum(nil)[:12])), []byte(sum)) {
		return false
	}
	t, err := strconv.ParseInt(ts, 16, 64)
	return err == nil && p.cfg.Now().Unix()-t < 300
}

// authorized checks the digest credentials of req (RFC 3261 §22.4, RFC
// 2617 MD5). With no SIPSecret configured everything is authorized.
func (p *PBX) authorized(req *sip.Request, user string) bool {
	if p.cfg.SIPSecret == "" {
		return true
	}
	h := req.GetHeader("Authorization")
	if h == nil {
		return false
	}
	cred, err := digest.ParseCredentials(h.Value())
	if err != nil || cred.Username != user || !p.nonceValid(cred.Nonce) {
		return false
	}
	want, err := digest.Digest(&digest.Challenge{Realm: p.cfg.Realm, Nonce: cred.Nonce, Algorithm: cred.Algorithm, QOP: qopList(cred.QOP)},
		digest.Options{Method: string(req.Method), URI: cred.URI, Username: user, Password: p.cfg.SIPSecret, Cnonce: cred.Cnonce, Count: cred.Nc})
	return err == nil && want.Response == cred.Response
}

func qopList(q string) []string {
	if q == "" {
		return nil
	}
	return []string{q}
}

func (p *PBX) challenge(req *sip.Request, tx sip.ServerTransaction) {
	res := sip.NewResponseFromRequest(req, sip.StatusUnauthorized, "Unauthorized", nil)
	chal := digest.Challenge{Realm: p.cfg.Realm, Nonce: p.nonce(), Algorithm: "MD5"}
	res.AppendHeader(sip.NewHeader("WWW-Authenticate", chal.String()))
	tx.Respond(res)
}

// handleRegister is the registrar: one contact per extension (max_contacts
// = 1, as the recordings' aors), replaced by each new REGISTER.
func (p *PBX) handleRegister(req *sip.Request, tx sip.ServerTransaction) {
	to := req.To()
	if to == nil {
		tx.Respond(sip.NewResponseFromRequest(req, sip.StatusBadRequest, "Bad Request", nil))
		return
	}
	user := to.Address.User
	p.mu.Lock()
	e := p.exts[user]
	p.mu.Unlock()
	if e == nil {
		tx.Respond(sip.NewResponseFromRequest(req, sip.StatusNotFound, "Not Found", nil))
		return
	}
	if !p.authorized(req, user) {
		p.challenge(req, tx)
		return
	}
	expires := p.cfg.DefaultExpiry
	if h := req.GetHeader("Expires"); h != nil {
		if n, err := strconv.Atoi(strings.TrimSpace(h.Value())); err == nil {
			expires = time.Duration(n) * time.Second
		}
	}
	var cURI *sip.Uri
	star := false
	if c := req.Contact(); c != nil {
		if c.Address.Wildcard || c.Address.Host == "*" {
			star = true
		} else {
			u := c.Address
			cURI = &u
			if v, ok := c.Params.Get("expires"); ok {
				if n, err := strconv.Atoi(v); err == nil {
					expires = time.Duration(n) * time.Second
				}
			}
		}
	}
	if expires > 0 && expires < p.cfg.MinExpiry {
		res := sip.NewResponseFromRequest(req, 423, "Interval Too Brief", nil)
		res.AppendHeader(sip.NewHeader("Min-Expires", strconv.Itoa(int(p.cfg.MinExpiry/time.Second))))
		tx.Respond(res)
		return
	}
	expires = min(expires, p.cfg.MaxExpiry)

	res := sip.NewResponseFromRequest(req, sip.StatusOK, "OK", nil)
	p.mu.Lock()
	switch {
	case star || expires == 0:
		p.removeContact(e)
	case cURI != nil:
		tcp := strings.EqualFold(req.Transport(), "tcp")
		callID := ""
		if h := req.CallID(); h != nil {
			callID = h.Value()
		}
		ua := ""
		if h := req.GetHeader("User-Agent"); h != nil {
			ua = h.Value()
		}
		c := &contact{uri: *cURI, source: req.Source(), tcp: tcp, expires: p.cfg.Now().Add(expires), userAgent: ua, callID: callID}
		created := e.contact == nil || e.contact.uri.String() != cURI.String()
		if e.contact != nil && created {
			p.removeContact(e)
		}
		e.contact = c
		p.stats.Registers++
		if created {
			p.emit(ami.NewMessage(append(amievent.Head(ami.EventContactStatus, "system,all", 12),
				ami.Header{Key: "URI", Value: cURI.String()},
				ami.Header{Key: "ContactStatus", Value: "Created"},
				ami.Header{Key: "AOR", Value: e.num},
				ami.Header{Key: "EndpointName", Value: e.num},
				ami.Header{Key: "RoundtripUsec", Value: "0"},
				ami.Header{Key: "UserAgent", Value: ua},
				ami.Header{Key: "RegExpire", Value: strconv.FormatInt(c.expires.Unix(), 10)},
				ami.Header{Key: "ViaAddress", Value: c.source},
				ami.Header{Key: "CallID", Value: callID})...),
				ami.NewMessage(append(amievent.Head(ami.EventPeerStatus, "system,all", 5),
					ami.Header{Key: "ChannelType", Value: "PJSIP"},
					ami.Header{Key: "Peer", Value: "PJSIP/" + e.num},
					ami.Header{Key: "PeerStatus", Value: "Reachable"})...))
			p.updateDevice(e.num)
		}
		ch := sip.ContactHeader{Address: *cURI}
		ch.Params = sip.NewParams()
		ch.Params.Add("expires", strconv.Itoa(int(expires/time.Second)))
		res.AppendHeader(&ch)
	}
	p.mu.Unlock()
	res.AppendHeader(sip.NewHeader("Expires", strconv.Itoa(int(expires/time.Second))))
	tx.Respond(res)
}

// removeContact unregisters an extension. p.mu held.
func (p *PBX) removeContact(e *ext) {
	c := e.contact
	if c == nil {
		return
	}
	e.contact = nil
	p.emit(ami.NewMessage(append(amievent.Head(ami.EventContactStatus, "system,all", 7),
		ami.Header{Key: "URI", Value: c.uri.String()},
		ami.Header{Key: "ContactStatus", Value: "Removed"},
		ami.Header{Key: "AOR", Value: e.num},
		ami.Header{Key: "EndpointName", Value: e.num},
		ami.Header{Key: "RoundtripUsec", Value: "0"})...),
		ami.NewMessage(append(amievent.Head(ami.EventPeerStatus, "system,all", 5),
			ami.Header{Key: "ChannelType", Value: "PJSIP"},
			ami.Header{Key: "Peer", Value: "PJSIP/" + e.num},
			ami.Header{Key: "PeerStatus", Value: "Unreachable"})...))
	p.updateDevice(e.num)
}

// expiryLoop removes contacts whose registration expired.
func (p *PBX) expiryLoop(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := p.cfg.Now()
		p.mu.Lock()
		for _, e := range p.exts {
			if e.contact != nil && now.After(e.contact.expires) {
				p.removeContact(e)
			}
		}
		p.mu.Unlock()
	}
}
