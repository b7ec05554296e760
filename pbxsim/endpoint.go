package pbxsim

import (
	"context"
	"strconv"

	"github.com/ctibridge/ctibridge/ami"
)

// actPJSIPShowEndpoint details one endpoint as res_pjsip does:
// EndpointDetail (with its caller ID, "Alice" <201>), TransportDetail,
// AorDetail, a ContactStatusDetail when registered, then
// EndpointDetailComplete (endpoint_details recording).
func (p *PBX) actPJSIPShowEndpoint(_ context.Context, _ *ami.Session, req ami.Message) []ami.Message {
	name := req.Get("Endpoint")
	if name == "" {
		return errResp("Endpoint parameter missing.")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.exts[name]
	trunk := name == p.cfg.Trunk
	if e == nil && !trunk {
		return errResp("Unable to retrieve endpoint " + name)
	}
	host, port := p.sipHostPort()
	id := func(m ami.Message) ami.Message { return withLeadingID(m, req) }
	state, active, cid, ctx := "Not in use", 0, "", "from-trunk"
	if e != nil {
		state, active, ctx = e.dev.endpointState(), len(e.chans), p.cfg.Context
		cid = `"` + e.name + `" <` + e.num + `>`
	} else {
		for _, ch := range p.channels {
			if ch.endpoint == p.cfg.Trunk {
				active++
			}
		}
	}
	over := map[string]string{"ObjectName": name, "Aors": name, "Context": ctx, "Callerid": cid,
		"DeviceState": state, "ActiveChannels": strconv.Itoa(active), "MediaAddress": host}
	hs := []ami.Header{{Key: "Event", Value: ami.EventEndpointDetail}}
	for _, kv := range endpointDetailHeaders {
		v, ok := over[kv[0]]
		if !ok {
			v = kv[1]
		}
		hs = append(hs, ami.Header{Key: kv[0], Value: v})
	}
	items := []ami.Message{id(ami.NewMessage(hs...))}
	hs = []ami.Header{{Key: "Event", Value: "TransportDetail"}}
	for _, kv := range transportDetailHeaders {
		v := kv[1]
		if kv[0] == "Bind" {
			v = host + ":" + strconv.Itoa(port)
		}
		hs = append(hs, ami.Header{Key: kv[0], Value: v})
	}
	items = append(items, id(ami.NewMessage(append(hs, ami.Header{Key: "EndpointName", Value: name})...)))
	var ct *contact
	if e != nil {
		ct = e.contact
	}
	contacts, n := "", "0"
	if ct != nil {
		contacts, n = name+"/"+ct.uri.String(), "1"
	}
	items = append(items, id(item(ami.EventAorDetail, "ObjectType", "aor", "ObjectName", name,
		"MinimumExpiration", strconv.Itoa(int(p.cfg.MinExpiry.Seconds())), "DefaultExpiration", strconv.Itoa(int(p.cfg.DefaultExpiry.Seconds())),
		"QualifyTimeout", "3.000000", "Qualify2xxOnly", "false", "Mailboxes", "", "SupportPath", "false",
		"RemoveUnavailable", "false", "VoicemailExtension", "", "MaxContacts", "1", "AuthenticateQualify", "false",
		"Contacts", contacts, "MaximumExpiration", strconv.Itoa(int(p.cfg.MaxExpiry.Seconds())), "QualifyFrequency", "0",
		"RemoveExisting", "true", "OutboundProxy", "", "TotalContacts", n, "ContactsRegistered", n, "EndpointName", name)))
	if ct != nil {
		items = append(items, id(item(ami.EventContactStatusDetail, "AOR", name, "URI", ct.uri.String(), "UserAgent", ct.userAgent,
			"RegExpire", strconv.FormatInt(ct.expires.Unix(), 10), "ViaAddress", ct.source, "CallID", ct.callID,
			"Status", "NonQualified", "RoundtripUsec", "N/A", "EndpointName", name, "ID", name+";@"+ct.callID,
			"AuthenticateQualify", "0", "OutboundProxy", "", "Path", "", "QualifyFrequency", "0",
			"QualifyTimeout", "3.000", "Qualify2xxOnly", "0")))
	}
	return list(req, "Following are Events for each object associated with the Endpoint", ami.EventEndpointDetailComplete, items)
}

// withLeadingID puts the request's ActionID right after Event, where
// res_pjsip's detail items carry it.
func withLeadingID(m ami.Message, req ami.Message) ami.Message {
	if id, ok := req.Lookup("ActionID"); ok {
		return m.Insert(1, "ActionID", id)
	}
	return m
}
