package nethcti

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/phonebook"
)

// The phonebook as the web app and NethLink list it: the search with an
// empty term lists every contact the user may see (the store's Search
// with "" is that), cticontact/{id} is the native contact read, and the
// speed dials are the user's own contacts of type speeddial. They read
// Config.Phonebook (the native API's) as the user, with the native
// rules of what a user sees. The lists a view (person, company) or a
// visibility (public, private, group) filters are pbviews.go's.

var errNoPhonebook = apiError(http.StatusServiceUnavailable, "no_phonebook", "no phonebook is configured")

// pbActor is the native phonebook's actor of u.
func pbActor(u *auth.User) phonebook.Actor {
	return phonebook.Actor{User: u.Username, Admin: auth.Allowed(u, auth.PhonebookWrite, "")}
}

// pbSearch serves GET /phonebook/search[/{term}]: the native search, or
// with no term the list of every contact.
func (f *Front) pbSearch(w http.ResponseWriter, r *http.Request, id Identity, legacy bool) int {
	q := r.URL.Query()
	view, visibility := q.Get("view"), q.Get("visibility")
	term := r.PathValue("term")
	if term != "" && !pbFiltered(view, visibility) {
		return f.passThrough(w, r, id, legacy)
	}
	if f.cfg.Phonebook == nil {
		return writeErr(w, r, errNoPhonebook)
	}
	limit, err1 := atoiDefault(q.Get("limit"), phonebook.DefaultLimit)
	offset, err2 := atoiDefault(q.Get("offset"), 0)
	if err1 != nil || err2 != nil {
		return writeErr(w, r, badRequest("limit and offset must be non-negative integers"))
	}
	if pbFiltered(view, visibility) {
		return f.pbFilteredList(w, r, id, term, view, visibility, min(limit, phonebook.MaxLimit), offset)
	}
	p, err := f.cfg.Phonebook.Search(r.Context(), pbActor(id.User), "", limit, offset)
	if err != nil {
		return writeErr(w, r, err)
	}
	return writeJSON(w, http.StatusOK, p)
}

func atoiDefault(s string, def int) (int, error) {
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, strconv.ErrSyntax
	}
	if n == 0 {
		return def, nil
	}
	return n, nil
}

// ctiContact serves GET /phonebook/cticontact/{id}: the native contact
// read.
func (f *Front) ctiContact(w http.ResponseWriter, r *http.Request, id Identity, _ bool) int {
	return f.native(w, r, id, http.MethodGet, "/phonebook/contact/"+r.PathValue("id"), nil)
}

// maxSpeedDials bounds the contacts scanned for the user's speed dials.
const maxSpeedDials = 5000

// speedDials serves GET /phonebook/speeddials: the user's own contacts of
// type speeddial (the web app keeps its favourites there), as a list.
func (f *Front) speedDials(w http.ResponseWriter, r *http.Request, id Identity, _ bool) int {
	if f.cfg.Phonebook == nil {
		return writeErr(w, r, errNoPhonebook)
	}
	out := []phonebook.Contact{}
	for offset := 0; offset < maxSpeedDials; offset += phonebook.MaxLimit {
		p, err := f.cfg.Phonebook.Search(r.Context(), pbActor(id.User), "", phonebook.MaxLimit, offset)
		if err != nil {
			return writeErr(w, r, err)
		}
		for _, c := range p.Rows {
			if c.Type == "speeddial" && c.OwnerID == id.User.Username {
				out = append(out, c)
			}
		}
		if offset+len(p.Rows) >= p.Count || len(p.Rows) == 0 {
			break
		}
	}
	return writeJSON(w, http.StatusOK, out)
}

// contactFields are the contact fields the native phonebook keeps.
var contactFields = map[string]bool{"id": true, "type": true, "name": true, "company": true, "workphone": true,
	"homephone": true, "cellphone": true, "fax": true, "workemail": true, "homeemail": true, "notes": true,
	"speeddial_num": true, "owner_id": true, "source": true}

// namesAgree reports whether a contact body's firstname and lastname
// are its name's parts: the web app (2026) sends them beside the name
// it makes of them ("first last"), which the native phonebook keeps.
func namesAgree(body map[string]any) bool {
	first, _ := body["firstname"].(string)
	last, _ := body["lastname"].(string)
	name, _ := body["name"].(string)
	return (first != "" || last != "") && name == strings.TrimSpace(strings.TrimSpace(first)+" "+strings.TrimSpace(last))
}

// pbWrite serves POST /phonebook/create, modify_cticontact and
// delete_cticontact with NethCTI's bodies: the fields the native
// phonebook keeps go to the native route (an id given as a string is a
// number there); a NethCTI-only field left empty is ignored, one with a
// value is refused (400 naming it), never dropped.
func (f *Front) pbWrite(w http.ResponseWriter, r *http.Request, id Identity, legacy bool) int {
	var raw json.RawMessage
	if err := decodeLenient(w, r, &raw); err != nil {
		return writeErr(w, r, err)
	}
	body, err := decodeObject(raw) // numbers kept exact
	if err != nil {
		return writeErr(w, r, badRequest("the body must be a JSON object"))
	}
	out := map[string]any{}
	var dropped []string
	derived := namesAgree(body)
	for k, v := range body {
		switch {
		case contactFields[k]:
			out[k] = v
		case derived && (k == "firstname" || k == "lastname"):
			// The web app's person: its name is "first last", kept.
		case v != nil && v != "" && v != false:
			dropped = append(dropped, k)
		}
	}
	if len(dropped) > 0 {
		slices.Sort(dropped)
		return writeErr(w, r, badRequest("ctibridge's phonebook does not keep "+strings.Join(dropped, ", ")+": leave them empty"))
	}
	if t, ok := out["type"].(string); ok && strings.HasPrefix(t, "group:") {
		return writeErr(w, r, notImplemented("sharing a contact with groups ("+t+") is not served: ctibridge's phonebook shares a contact with everyone (public) or no one (private)"))
	}
	if s, ok := out["id"].(string); ok {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return writeErr(w, r, badRequest("id: want a number"))
		}
		out["id"] = n
	}
	prefix := PrefixAPI
	if legacy {
		prefix = PrefixWebrest
	}
	return f.nativeJSON(w, r, id, r.URL.Path[len(prefix):], out)
}
