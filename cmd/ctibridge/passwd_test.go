package main

import (
	"bytes"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

func TestRunPasswd(t *testing.T) {
	for _, in := range []string{"s3cret\nignored second line\n", "s3cret\r\n", "s3cret"} {
		var out, errOut bytes.Buffer
		if err := runPasswd(strings.NewReader(in), &out, &errOut); err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		h := strings.TrimSpace(out.String())
		if bcrypt.CompareHashAndPassword([]byte(h), []byte("s3cret")) != nil {
			t.Errorf("%q: hash %q does not match", in, h)
		}
	}
	for _, in := range []string{"", "\n", strings.Repeat("x", 73) + "\n"} {
		var out bytes.Buffer
		if err := runPasswd(strings.NewReader(in), &out, &out); err == nil {
			t.Errorf("%q: no error", in)
		}
	}
}
