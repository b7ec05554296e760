package rest

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
)

// decode reads a JSON request body into v (a pointer to a struct): at most
// MaxBody bytes (413 beyond), one object, no unknown fields, no wrong
// types, and no CR, LF or NUL in any string (400). It is the only place
// request bodies are read.
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	r.Body = http.MaxBytesReader(w, r.Body, MaxBody)
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return toError(err)
		}
		return badRequest("the body must hold one JSON object and nothing after it")
	}
	if f := badString(reflect.ValueOf(v).Elem()); f != "" {
		return &Error{Status: http.StatusBadRequest, Code: "bad_request", Message: "field " + f + ": CR, LF or NUL not allowed"}
	}
	return nil
}

func decodeError(err error) error {
	var mbe *http.MaxBytesError
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &mbe):
		return toError(err)
	case errors.Is(err, io.EOF):
		return badRequest("empty body: a JSON object is required")
	case errors.As(err, &te):
		return badRequest("field %s: want %s, got %s", te.Field, te.Type.Kind(), te.Value)
	case errors.As(err, &se), errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("malformed JSON: %v", err)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return badRequest("unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
	}
	return badRequest("bad JSON body: %v", err)
}

// badString returns the JSON name of the first string field holding CR,
// LF or NUL, or "".
func badString(v reflect.Value) string {
	t := v.Type()
	for i := range t.NumField() {
		f := v.Field(i)
		var s string
		switch f.Kind() {
		case reflect.String:
			s = f.String()
		case reflect.Pointer:
			if f.IsNil() || f.Elem().Kind() != reflect.String {
				continue
			}
			s = f.Elem().String()
		default:
			continue
		}
		if strings.ContainsAny(s, "\r\n\x00") {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
			return name
		}
	}
	return ""
}
