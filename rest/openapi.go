package rest

import (
	_ "embed"
	"net/http"
	"strconv"

	"github.com/ctibridge/ctibridge/auth"
)

// openAPI is the OpenAPI 3 document of the API. docs/openapi.yaml is the
// same file (a test keeps them equal, and keeps the document's paths equal
// to the routed ones).
//
//go:embed openapi.yaml
var openAPI []byte

var (
	hdrYAML       = []string{"application/yaml"}
	openAPILength = []string{strconv.Itoa(len(openAPI))}
)

func serveOpenAPI(w http.ResponseWriter, r *http.Request, _ *auth.User) int {
	h := w.Header()
	h["Content-Type"] = hdrYAML
	h["Content-Length"] = openAPILength
	w.WriteHeader(http.StatusOK)
	w.Write(openAPI)
	return http.StatusOK
}
