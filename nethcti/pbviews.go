package nethcti

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"slices"

	"github.com/ctibridge/ctibridge/phonebook"
)

// The phonebook's filtered lists, as the web app asks for them
// (nethvoice-cti lib/phonebook.ts getPhonebook: view = all, person or
// company, visibility = all, public, private or group). They filter the
// native search's matches (the user's visible contacts whose name,
// company or numbers hold the term): person keeps the contacts with a
// person's name (not empty, not the web app's company marker "-");
// company lists the companies, as nethcti-server's company view, one
// row per company with the company's own contact (the one with no
// person's name) and, in "contacts", a JSON string of the others
// ({id, name, source}, by name); public and private keep the contacts
// of that type; group keeps none, as the native phonebook shares a
// contact with everyone or no one (never with groups). Paging is over
// the filtered rows (the companies for company).

// maxFiltered bounds the native matches a filtered list reads.
const maxFiltered = 5000

// pbFiltered reports whether view and visibility ask for more than the
// native search: a filtered list.
func pbFiltered(view, visibility string) bool {
	return (view != "" && view != "all") || (visibility != "" && visibility != "all")
}

// pbFilteredList serves a filtered list: the page of the rows view and
// visibility keep among the native search's matches of term.
func (f *Front) pbFilteredList(w http.ResponseWriter, r *http.Request, id Identity, term, view, visibility string, limit, offset int) int {
	switch view {
	case "", "all", "person", "company":
	default:
		return writeErr(w, r, badRequest("view: want all, person or company"))
	}
	switch visibility {
	case "", "all", phonebook.TypePublic, phonebook.TypePrivate, "group":
	default:
		return writeErr(w, r, badRequest("visibility: want all, public, private or group"))
	}
	if f.cfg.Phonebook == nil {
		return writeErr(w, r, errNoPhonebook)
	}
	all, err := f.pbAll(r.Context(), id, term)
	if err != nil {
		return writeErr(w, r, err)
	}
	kept := all[:0]
	for _, c := range all {
		if keepContact(c, view, visibility) {
			kept = append(kept, c)
		}
	}
	if view == "company" {
		rows := companies(kept)
		return writeJSON(w, http.StatusOK, struct {
			Count int              `json:"count"`
			Rows  []map[string]any `json:"rows"`
		}{len(rows), pageOf(rows, limit, offset)})
	}
	return writeJSON(w, http.StatusOK, phonebook.Page{Count: len(kept), Rows: pageOf(kept, limit, offset)})
}

// pbAll is every native match of term the user sees, in the native
// order; more than maxFiltered answers 501.
func (f *Front) pbAll(ctx context.Context, id Identity, term string) ([]phonebook.Contact, error) {
	var out []phonebook.Contact
	for offset := 0; ; offset += phonebook.MaxLimit {
		p, err := f.cfg.Phonebook.Search(ctx, pbActor(id.User), term, phonebook.MaxLimit, offset)
		if err != nil {
			return nil, err
		}
		if p.Count > maxFiltered {
			return nil, notImplemented("a filtered phonebook list of more than 5000 contacts is not served: narrow the search")
		}
		out = append(out, p.Rows...)
		if len(p.Rows) == 0 || offset+len(p.Rows) >= p.Count {
			return out, nil
		}
	}
}

// isPerson reports whether c is a person's contact (the web app's
// mapContact: a name other than its company marker "-").
func isPerson(c *phonebook.Contact) bool { return c.Name != "" && c.Name != "-" }

func keepContact(c phonebook.Contact, view, visibility string) bool {
	if c.Type == phonebook.TypeSpeeddial {
		return false // nethcti-server's lists leave the speed dials out
	}
	switch visibility {
	case phonebook.TypePublic, phonebook.TypePrivate:
		if c.Type != visibility {
			return false
		}
	case "group":
		return false
	}
	switch view {
	case "person":
		return isPerson(&c)
	case "company":
		return c.Company != ""
	}
	return true
}

// companies groups contacts by company (sorted by company): each row
// the company's own contact's fields (null when it has none) and its
// people.
func companies(cs []phonebook.Contact) []map[string]any {
	type person struct {
		ID     int64  `json:"id"`
		Name   string `json:"name"`
		Source string `json:"source"`
	}
	by := map[string][]phonebook.Contact{}
	for _, c := range cs {
		by[c.Company] = append(by[c.Company], c)
	}
	names := make([]string, 0, len(by))
	for k := range by {
		names = append(names, k)
	}
	slices.Sort(names)
	rows := make([]map[string]any, 0, len(names))
	for _, name := range names {
		row := map[string]any{"company": name, "id": nil, "owner_id": nil, "type": nil, "workphone": nil, "homephone": nil,
			"cellphone": nil, "fax": nil, "workemail": nil, "notes": nil, "source": nil}
		people := []person{}
		for _, c := range by[name] {
			if isPerson(&c) {
				people = append(people, person{c.ID, c.Name, pbSource(c.Source)})
			} else if row["id"] == nil {
				row["id"], row["owner_id"], row["type"], row["workphone"], row["homephone"] = c.ID, c.OwnerID, c.Type, c.WorkPhone, c.HomePhone
				row["cellphone"], row["fax"], row["workemail"], row["notes"], row["source"] = c.CellPhone, c.Fax, c.WorkEmail, c.Notes, pbSource(c.Source)
			}
		}
		slices.SortStableFunc(people, func(a, b person) int { return cmp.Compare(a.Name, b.Name) })
		b, _ := json.Marshal(people)
		row["contacts"] = string(b) // a JSON string, as nethcti-server sends it
		rows = append(rows, row)
	}
	return rows
}

// pbSource is a contact's source as NethCTI names it: cti unless the
// store names another.
func pbSource(s string) string { return cmp.Or(s, "cti") }

// pageOf is rows[offset:offset+limit], within bounds.
func pageOf[T any](rows []T, limit, offset int) []T {
	if offset >= len(rows) {
		return []T{}
	}
	return rows[offset:min(len(rows), offset+limit)]
}
