package rest

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
)

// Transfers to a colleague's voicemail or mobile, and the pop-up's link
// to a customer card: what the panel needs beyond NethCTI's actions.
// transfer_voicemail sends the other party of the user's call to the
// voicemail box of extension "to" (Config.VoicemailExten, FreePBX's
// vmu<ext> by default); transfer_cellphone sends it to the cellphone of
// the user whose main extension is "to" (the users file's cellphone),
// which the caller never learns: /user/me lists only which extensions
// have one (mobiles).

// DefaultVoicemailExten is FreePBX's extension that drops a call into
// <ext>'s voicemail box with the unavailable greeting (ext-local), the
// one NethCTI writes for the voicemail presence.
const DefaultVoicemailExten = "vmu{exten}"

var transferActions = []action{
	act("transfer_voicemail", planTransferVoicemail),
	act("transfer_cellphone", planTransferCellphone),
}

// CheckVoicemailExten checks a voicemail extension template: it names
// {exten}, and what it makes is an extension name (letters, digits, *,
// #, +, -, _).
func CheckVoicemailExten(tmpl string) error {
	if !strings.Contains(tmpl, "{exten}") {
		return errors.New("the voicemail extension must contain {exten}, like vmu{exten} or *{exten}")
	}
	for _, r := range strings.ReplaceAll(tmpl, "{exten}", "") {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || strings.ContainsRune("*#+-_", r)) {
			return errors.New("the voicemail extension may hold only letters, digits, *, #, +, - and _ beside {exten}")
		}
	}
	return nil
}

// CheckPopupLink checks the pop-up's link template: an absolute http or
// https URL once {number} and {name} are filled in.
func CheckPopupLink(tmpl string) error {
	u, err := url.Parse(fillPopupLink(tmpl, "1", "x"))
	if err != nil {
		return errors.New("the pop-up link is not a URL: " + err.Error())
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("the pop-up link must be an absolute http:// or https:// URL")
	}
	return nil
}

// fillPopupLink fills the template as the panel does (each value
// URL-escaped).
func fillPopupLink(tmpl, number, name string) string {
	return strings.NewReplacer("{number}", url.QueryEscape(number), "{name}", url.QueryEscape(name)).Replace(tmpl)
}

// me answers GET /user/me: the user, the pop-up's link template and,
// for a user who may transfer calls, the extensions whose owner has a
// cellphone (not the numbers).
func (h *handler) me(w http.ResponseWriter, r *http.Request, u *auth.User) int {
	m := meOf(u)
	m.PopupLink = h.cfg.PopupLink
	if slices.ContainsFunc(u.Endpoints, func(e string) bool { return auth.Allowed(u, auth.Transfer, e) }) {
		for _, o := range h.auth.Users().All() {
			if len(o.Endpoints) > 0 && o.Cellphone != "" {
				m.Mobiles = append(m.Mobiles, o.Endpoints[0])
			}
		}
		slices.Sort(m.Mobiles)
		m.Mobiles = slices.Compact(m.Mobiles)
	}
	return writeJSON(w, http.StatusOK, m)
}

// cellphoneOf is the cellphone of the user whose main extension is exten.
func (h *handler) cellphoneOf(exten string) string {
	for _, o := range h.auth.Users().All() {
		if len(o.Endpoints) > 0 && o.Endpoints[0] == exten && o.Cellphone != "" {
			return o.Cellphone
		}
	}
	return ""
}

// transferOther checks the user's call and returns the channel to send on.
func (h *handler) transferOther(u *auth.User, s *calls.Snapshot, req *convToReq) (calls.Extension, string, error) {
	if err := h.checkNumber("to", req.To); err != nil {
		return calls.Extension{}, "", err
	}
	_, _, _, other, err := h.endpointConv(u, s, auth.Transfer, req.EndpointID, req.ConvID)
	if err != nil {
		return calls.Extension{}, "", err
	}
	if other == "" {
		return calls.Extension{}, "", conflict("conversation %q has no other party to transfer", req.ConvID)
	}
	to, ok := s.Extensions.Lookup(req.To)
	if !ok {
		return calls.Extension{}, "", notFound("extension %q does not exist", req.To)
	}
	return to, other, nil
}

func planTransferVoicemail(h *handler, u *auth.User, s *calls.Snapshot, req *convToReq) ([]ami.Message, error) {
	to, other, err := h.transferOther(u, s, req)
	if err != nil {
		return nil, err
	}
	if to.Voicemail == nil {
		return nil, conflict("extension %s has no voicemail box", to.Exten)
	}
	exten := strings.ReplaceAll(h.cfg.VoicemailExten, "{exten}", to.Exten)
	return []ami.Message{ami.NewAction(ami.ActionRedirect,
		"Channel", other, "Context", h.cfg.Context, "Exten", exten, "Priority", "1")}, nil
}

func planTransferCellphone(h *handler, u *auth.User, s *calls.Snapshot, req *convToReq) ([]ami.Message, error) {
	to, other, err := h.transferOther(u, s, req)
	if err != nil {
		return nil, err
	}
	cell := h.cellphoneOf(to.Exten)
	if cell == "" {
		return nil, conflict("extension %s has no cellphone in the users file", to.Exten)
	}
	if err := h.checkNumber("cellphone", cell); err != nil {
		return nil, err
	}
	return []ami.Message{ami.NewAction(ami.ActionRedirect,
		"Channel", other, "Context", h.cfg.Context, "Exten", cell, "Priority", "1")}, nil
}
