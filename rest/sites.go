package rest

import (
	"cmp"
	"net/http"
	"reflect"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
)

// Several PBXs in one process (docs/operations.md "Several PBXs"): State
// is then the combined state (calls.Multi), where a named PBX's ids are
// "site2:201", and each named PBX is a Site with its own engine and AMI
// client. Reads filter by ?pbx=; an action is planned against the engine
// of the PBX its ids name, with the user as that PBX sees it
// (auth.User.ForPBX), and sent through that PBX's client.

// Site is a named PBX: its own engine's state (ids without the PBX), its
// AMI client and, optionally, its link's Refresh.
type Site struct {
	Name    string
	State   State
	PBX     PBX
	Refresh Refresher
}

// target is where an action goes: the state it is planned against, the
// user as that PBX sees it, the client it is sent through.
type target struct {
	snap    *calls.Snapshot
	user    *auth.User
	pbx     PBX
	refresh Refresher
}

// idTags are the JSON fields of action bodies that name an entity of a
// PBX (qualified "site2:..." for a named one); convid is apart.
var idTags = map[string]bool{"endpointId": true, "destId": true, "addEndpointId": true, "parking": true,
	"queueId": true, "queue": true, "confId": true}

// idFields are the indexes of req's id fields and of its convid (-1 when
// none), computed once per request type.
func idFields(t reflect.Type) (ids []int, conv int) {
	conv = -1
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Type.Kind() != reflect.String {
			continue
		}
		switch tag := f.Tag.Get("json"); {
		case tag == "convid":
			conv = i
		case idTags[tag]:
			ids = append(ids, i)
		}
	}
	return ids, conv
}

func (h *handler) known(name string) bool {
	_, ok := h.sites[name]
	return ok
}

// route finds the PBX the ids of req (a pointer to an action body) name,
// rewrites them as that PBX's engine knows them, and returns where the
// action goes. Ids naming two PBXs are a 400.
func (h *handler) route(u *auth.User, req any, ids []int, conv int) (target, error) {
	def := target{snap: h.state.Snapshot(), user: u, pbx: h.pbx, refresh: h.cfg.Refresh}
	if len(h.sites) == 0 {
		return def, nil
	}
	v := reflect.ValueOf(req).Elem()
	name, first, endpoint := "", "", ""
	if len(u.Endpoints) == 1 {
		// Where an omitted endpointId is the user's only endpoint
		// (ownEndpoint), that endpoint's PBX.
		name, _ = calls.SplitID(u.Endpoints[0], h.known)
	}
	for _, i := range ids {
		id := v.Field(i).String()
		if id == "" {
			continue
		}
		pbx, _ := calls.SplitID(id, h.known)
		if first == "" {
			name, first = pbx, id
		} else if pbx != name {
			return def, badRequest("%s and %s are on two PBXs: an action acts on one", first, id)
		}
		if endpoint == "" {
			endpoint = id
		}
	}
	if !u.SeesPBX(name) {
		return def, forbidden("%s may not act on PBX %s", u.Username, cmp.Or(name, calls.DefaultPBXName))
	}
	if name == "" {
		return def, nil
	}
	site := h.sites[name]
	if conv >= 0 {
		c := v.Field(conv)
		id := h.resolveConv(def.snap, endpoint, c.String())
		if p, local := calls.SplitID(id, h.known); p == name {
			c.SetString(local)
		} else if id != "" {
			return def, conflict("conversation %q is not on PBX %s", c.String(), name)
		}
	}
	for _, i := range ids {
		if _, local := calls.SplitID(v.Field(i).String(), h.known); local != "" {
			v.Field(i).SetString(local)
		}
	}
	return target{snap: site.State.Snapshot(), user: u.ForPBX(name + string(calls.PBXSep)), pbx: site.PBX, refresh: site.Refresh}, nil
}

// resolveConv turns an opaque conversation id (auth.OpaqueConvID of the
// combined id) back into the combined id, from the endpoint's
// conversations.
func (h *handler) resolveConv(s *calls.Snapshot, endpoint, convid string) string {
	if !auth.IsOpaque(convid) {
		return convid
	}
	for id := range s.Extensions.Get(endpoint).Conversations {
		if auth.OpaqueConvID(id) == convid {
			return id
		}
	}
	return convid
}

// seenID answers 404 for an entity (path value param) of a PBX the user
// does not see, as for one that does not exist; otherwise next.
func (h *handler) seenID(param string, next endpoint) endpoint {
	return func(w http.ResponseWriter, r *http.Request, u *auth.User) int {
		if id := r.PathValue(param); !u.SeesID(id) {
			return writeError(w, h.log, r, notFound("%q does not exist", id))
		}
		return next(w, r, u)
	}
}
