package nethcti

import (
	"encoding/json"
	"maps"
	"net/http"
	"time"
)

// DefaultFeatureCodes is GET /astproxy/feature_codes's answer when
// Config.FeatureCodes is nil: the audio test code phone-island dials
// to warm up its audio and the web app offers (both fall back to *41).
var DefaultFeatureCodes = map[string]string{"audio_test": "*41"}

// featureCodes serves GET /astproxy/feature_codes: the PBX's feature
// codes by name (Config.FeatureCodes).
func (f *Front) featureCodes(w http.ResponseWriter, _ *http.Request, _ Identity, _ bool) int {
	codes := f.cfg.FeatureCodes
	if codes == nil {
		codes = DefaultFeatureCodes
	}
	return writeJSON(w, http.StatusOK, maps.Clone(codes))
}

// nethlinkSetting is the setting that keeps NethLink's last heartbeat.
const nethlinkSetting = "nethlink"

// nethlinkBeat is what POST /user/nethlink keeps: the NethLink extension
// and when it last said it was running.
type nethlinkBeat struct {
	Extension string `json:"extension"`
	Timestamp string `json:"timestamp"` // RFC 3339, UTC
}

// nethlinkPost serves POST /user/nethlink {extension}: NethLink's
// heartbeat, kept as the user's setting "nethlink" with the time. The
// extension must be one of the user's (403 otherwise).
func (f *Front) nethlinkPost(w http.ResponseWriter, r *http.Request, id Identity, _ bool) int {
	var req struct {
		Extension flexString `json:"extension"`
	}
	if err := decodeLenient(w, r, &req); err != nil {
		return writeErr(w, r, err)
	}
	if req.Extension == "" {
		return writeErr(w, r, badRequest("extension: want the NethLink extension"))
	}
	if !id.User.Owns(string(req.Extension)) {
		return writeErr(w, r, apiError(http.StatusForbidden, "forbidden", "the extension must be one of yours"))
	}
	v, _ := json.Marshal(nethlinkBeat{Extension: string(req.Extension), Timestamp: f.now().UTC().Format(time.RFC3339)})
	if err := f.store.PutSetting(r.Context(), id.User.Username, nethlinkSetting, v); err != nil {
		return writeErr(w, r, err)
	}
	return writeJSON(w, http.StatusOK, struct{}{})
}

// nethlinkGet serves GET /user/nethlink: the last heartbeat, {} before
// the first.
func (f *Front) nethlinkGet(w http.ResponseWriter, r *http.Request, id Identity, _ bool) int {
	s, err := f.store.Settings(r.Context(), id.User.Username)
	if err != nil {
		return writeErr(w, r, err)
	}
	if v, ok := s[nethlinkSetting]; ok {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.Write(v)
		return http.StatusOK
	}
	return writeJSON(w, http.StatusOK, struct{}{})
}
