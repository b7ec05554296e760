package phonebook

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strings"
)

// MaxImportRows bounds one CSV import.
const MaxImportRows = 100000

// ImportOptions tune Import.
type ImportOptions struct {
	// AllOrNothing imports nothing when any row is bad.
	AllOrNothing bool
	// Type is the type of rows without a type column or value. Default
	// private.
	Type string
}

// LineError is one refused CSV row.
type LineError struct {
	Line  int    `json:"line"`
	Error string `json:"error"`
}

// ImportReport says what an import did.
type ImportReport struct {
	Imported int         `json:"imported"`
	Errors   []LineError `json:"errors"`
}

// CSVError is a CSV file refused as a whole: a 400 (no header, unknown
// column) or, with TooLarge, a 413 (more than MaxImportRows rows).
type CSVError struct {
	Msg      string
	TooLarge bool
}

func (e *CSVError) Error() string { return "phonebook: csv: " + e.Msg }

// Import reads contacts from CSV with a header line naming the columns
// (the Contact JSON names: name, company, workphone, ...; owner_id is
// ignored: rows belong to a). Every row is checked first; bad rows are
// reported by line and skipped, and the good rows are stored in one
// transaction: either all of them or, on a database error, none. With
// AllOrNothing any bad row cancels the import. A row is never stored in
// part.
func (b *Book) Import(ctx context.Context, a Actor, r io.Reader, opt ImportOptions) (ImportReport, error) {
	rep := ImportReport{Errors: []LineError{}}
	if opt.Type == "" {
		opt.Type = TypePrivate
	}
	cr := csv.NewReader(r)
	cr.ReuseRecord = false
	header, err := cr.Read()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return rep, &CSVError{Msg: "empty file: a header line is required"}
		}
		var pe *csv.ParseError
		if !errors.As(err, &pe) {
			return rep, err // reading failed: body too large, connection gone
		}
		return rep, &CSVError{Msg: err.Error()}
	}
	cr.FieldsPerRecord = len(header)
	var proto Contact
	idx := map[string]int{}
	for _, f := range proto.fields() {
		idx[f.name] = -1
	}
	for i, h := range header {
		h = strings.ToLower(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")))
		j, ok := idx[h]
		if !ok {
			return rep, &CSVError{Msg: fmt.Sprintf("unknown column %q", h)}
		}
		if j >= 0 {
			return rep, &CSVError{Msg: fmt.Sprintf("column %q twice", h)}
		}
		idx[h] = i
	}
	var good []Contact
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		line := 0
		if err == nil {
			line, _ = cr.FieldPos(0)
		} else {
			var pe *csv.ParseError
			if !errors.As(err, &pe) {
				// Reading failed (body too large, connection gone):
				// import nothing rather than a truncated file.
				return ImportReport{Errors: []LineError{}}, err
			}
			line, err = pe.StartLine, pe.Err
			rep.Errors = append(rep.Errors, LineError{line, err.Error()})
			continue
		}
		if len(good)+len(rep.Errors) >= MaxImportRows {
			return ImportReport{Errors: []LineError{}}, &CSVError{Msg: fmt.Sprintf("more than %d rows", MaxImportRows), TooLarge: true}
		}
		c := Contact{Type: opt.Type, Source: "csv"}
		for _, f := range c.fields() {
			if i := idx[f.name]; i >= 0 && rec[i] != "" {
				*f.v = strings.TrimSpace(rec[i])
			}
		}
		c.OwnerID = a.User
		if err := c.Validate(); err != nil {
			rep.Errors = append(rep.Errors, LineError{line, strings.TrimPrefix(err.Error(), "phonebook: ")})
			continue
		}
		if !CanEdit(a, c) {
			rep.Errors = append(rep.Errors, LineError{line, "only admins may import public contacts"})
			continue
		}
		good = append(good, c)
	}
	if len(good) == 0 || (opt.AllOrNothing && len(rep.Errors) > 0) {
		return rep, nil
	}
	if err := b.store.CreateMany(ctx, good); err != nil {
		return rep, err
	}
	rep.Imported = len(good)
	b.changed()
	return rep, nil
}
