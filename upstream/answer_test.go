package upstream

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestErrorMessage(t *testing.T) {
	for _, tc := range []struct{ name, body, want string }{
		{"shape", `{"error":{"code":"bad","message":"no such user"}}`, "no such user"},
		{"no message", `{"error":{"code":"bad"}}`, `{"error":{"code":"bad"}}`},
		{"text", "upstream down", "upstream down"},
		{"empty", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := &http.Response{Body: io.NopCloser(strings.NewReader(tc.body))}
			if got := ErrorMessage(resp); got != tc.want {
				t.Errorf("ErrorMessage = %q, want %q", got, tc.want)
			}
		})
	}
}
