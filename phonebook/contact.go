package phonebook

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Contact types.
const (
	TypePrivate   = "private"   // seen and edited by its owner only
	TypePublic    = "public"    // seen by everyone, edited by admins
	TypeSpeeddial = "speeddial" // the owner's speed dial: as private
)

// Contact is one phonebook entry, with NethCTI's JSON names.
type Contact struct {
	ID           int64  `json:"id"`
	OwnerID      string `json:"owner_id"`
	Type         string `json:"type"`
	Name         string `json:"name"`
	Company      string `json:"company"`
	WorkPhone    string `json:"workphone"`
	HomePhone    string `json:"homephone"`
	CellPhone    string `json:"cellphone"`
	Fax          string `json:"fax"`
	WorkEmail    string `json:"workemail"`
	HomeEmail    string `json:"homeemail"`
	Notes        string `json:"notes"`
	SpeeddialNum string `json:"speeddial_num"`
	Source       string `json:"source"`
}

// Page is one page of search results; Count is the number of matches
// over all pages.
type Page struct {
	Count int       `json:"count"`
	Rows  []Contact `json:"rows"`
}

// Query is a search. Viewer is the user searching: they see public
// contacts and their own private and speed-dial ones.
type Query struct {
	Viewer string
	// Term matches name or company as a case-insensitive substring and,
	// when it looks like a number, any normalised number as a substring.
	// Empty matches everything visible.
	Term   string
	Limit  int // default DefaultLimit, at most MaxLimit
	Offset int
}

// Limits of Query.
const (
	DefaultLimit = 50
	MaxLimit     = 500
	// MaxField is the longest text field accepted, in bytes (notes:
	// MaxNotes).
	MaxField = 256
	MaxNotes = 4096
)

var (
	// ErrNotFound: no contact with that id (or not visible to the user).
	ErrNotFound = errors.New("phonebook: contact not found")
	// ErrForbidden: the user may not change that contact.
	ErrForbidden = errors.New("phonebook: not allowed")
)

// InvalidError says why a contact or query was refused (a 400).
type InvalidError struct {
	Field string
	Msg   string
}

func (e *InvalidError) Error() string { return "phonebook: " + e.Field + ": " + e.Msg }

// Validate checks a contact's type and field sizes, and that every text
// is valid UTF-8 without NUL.
func (c *Contact) Validate() error {
	switch c.Type {
	case TypePrivate, TypePublic, TypeSpeeddial:
	default:
		return &InvalidError{"type", fmt.Sprintf("%q is not private, public or speeddial", c.Type)}
	}
	for _, f := range c.fields() {
		max := MaxField
		if f.name == "notes" {
			max = MaxNotes
		}
		switch {
		case len(*f.v) > max:
			return &InvalidError{f.name, fmt.Sprintf("longer than %d bytes", max)}
		case !utf8.ValidString(*f.v) || strings.ContainsRune(*f.v, 0):
			return &InvalidError{f.name, "not valid UTF-8 text"}
		}
	}
	if strings.TrimSpace(c.Name) == "" && strings.TrimSpace(c.Company) == "" {
		return &InvalidError{"name", "a contact needs a name or a company"}
	}
	return nil
}

type field struct {
	name string
	v    *string
}

// fields lists the text fields in CSV column order.
func (c *Contact) fields() []field {
	return []field{
		{"owner_id", &c.OwnerID}, {"type", &c.Type}, {"name", &c.Name}, {"company", &c.Company},
		{"workphone", &c.WorkPhone}, {"homephone", &c.HomePhone}, {"cellphone", &c.CellPhone},
		{"fax", &c.Fax}, {"workemail", &c.WorkEmail}, {"homeemail", &c.HomeEmail},
		{"notes", &c.Notes}, {"speeddial_num", &c.SpeeddialNum}, {"source", &c.Source},
	}
}

// Numbers returns the contact's phone numbers that are not empty.
func (c *Contact) Numbers() []string {
	var out []string
	for _, n := range []string{c.WorkPhone, c.CellPhone, c.HomePhone, c.Fax, c.SpeeddialNum} {
		if strings.TrimSpace(n) != "" {
			out = append(out, n)
		}
	}
	return out
}

// DisplayName is the name shown for a match: the name, else the company.
func (c *Contact) DisplayName() string {
	if s := strings.TrimSpace(c.Name); s != "" {
		return s
	}
	return strings.TrimSpace(c.Company)
}

// Visible reports whether viewer may see c.
func (c *Contact) Visible(viewer string) bool {
	return c.Type == TypePublic || c.OwnerID == viewer
}
