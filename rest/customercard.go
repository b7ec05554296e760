package rest

import (
	"io"
	"net/http"
	"net/url"

	"github.com/ctibridge/ctibridge/auth"
)

// Doer sends a request to a remote service whose base URL it knows (the
// request's URL is a path); *upstream.Client satisfies it.
type Doer interface {
	Do(req *http.Request) (*http.Response, error)
}

// maxCustomerCard bounds what is relayed from the customer-card service.
const maxCustomerCard = 1 << 20

var errNoCustomerCard = &Error{Status: http.StatusServiceUnavailable, Code: "no_customer_card", Message: "no customer-card service is configured"}

func (h *handler) registerCustomerCard() {
	h.handle("GET /customercard/{number}", false, h.customerCard)
}

// customerCard relays GET /customercard/{number} to the configured
// customer-card service (a CRM page or JSON about the caller), with the
// user's name in X-CTI-User, and answers with what it answered.
func (h *handler) customerCard(w http.ResponseWriter, r *http.Request, u *auth.User) int {
	if h.cfg.CustomerCard == nil {
		return writeError(w, h.log, r, errNoCustomerCard)
	}
	number := r.PathValue("number")
	if err := h.checkNumber("number", number); err != nil {
		return writeError(w, h.log, r, err)
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, "/customercard/"+url.PathEscape(number), nil)
	if err != nil {
		return writeError(w, h.log, r, err)
	}
	req.Header.Set("X-CTI-User", u.Username)
	if a := r.Header.Get("Accept"); a != "" {
		req.Header.Set("Accept", a)
	}
	resp, err := h.cfg.CustomerCard.Do(req)
	if err != nil {
		return writeError(w, h.log, r, &Error{Status: http.StatusBadGateway, Code: "upstream_error", Message: "the customer-card service did not answer", Err: err})
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return writeError(w, h.log, r, notFound("no customer card for %s", number))
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return writeError(w, h.log, r, &Error{Status: http.StatusBadGateway, Code: "upstream_error", Message: "the customer-card service answered " + resp.Status})
	}
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		w.Header().Set("Content-Type", ct)
	}
	DocumentHeaders(w.Header()) // a CRM's page, maybe
	w.WriteHeader(http.StatusOK)
	io.Copy(w, io.LimitReader(resp.Body, maxCustomerCard))
	return http.StatusOK
}
