package upstream

import (
	"encoding/json"
	"io"
	"net/http"
)

// ErrorMessage reads an error answer's body (at most 64 KiB) and returns
// its message: the "message" of the {"error":{"code","message"}} shape the
// services ctibridge fronts answer with, else the body as it came. It does
// not close the body.
func ErrorMessage(resp *http.Response) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if json.Unmarshal(b, &e) == nil && e.Error.Message != "" {
		return e.Error.Message
	}
	return string(b)
}
