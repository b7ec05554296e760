package nethcti

import "net/http"

// register lists every route of the front (without its prefix).
func (f *Front) register() {
	f.handle(onAPI, "POST /login", true, f.loginJWT)
	f.handle(onAPI, "POST /logout", false, f.logout)
	f.handle(onWebrest, "POST /authentication/login", true, f.loginLegacy)
	f.handle(onWebrest, "POST /authentication/logout", false, f.logout)
	f.handle(onAPI, "POST /tokens/persistent/{audience}", false, f.tokenCreate)
	f.handle(onAPI, "GET /tokens/persistent/{audience}", false, f.tokenCheck)
	f.handle(onAPI, "DELETE /tokens/persistent/{audience}", false, f.tokenRemove)
	f.handle(onBoth, "POST /authentication/phone_island_token_login", false, f.islandLogin)
	f.handle(onBoth, "GET /authentication/phone_island_token_check", false, f.islandCheck)
	f.handle(onBoth, "GET /authentication/phone_island_token_check/{subtype}", false, f.islandCheck)
	f.handle(onBoth, "POST /authentication/persistent_token_remove", false, f.islandRemove)

	f.handle(onBoth, "GET /user/me", false, f.me)
	f.handle(onBoth, "GET /user/endpoints/all", false, f.endpointsAll)
	f.handle(onBoth, "GET /astproxy/opgroups", false, f.opgroups)
	f.handle(onBoth, "GET /user/all_avatars", false, f.allAvatars)
	f.handle(onBoth, "POST /user/settings", false, f.settingsPost)
	f.handle(onBoth, "DELETE /user/setting/{prop}", false, f.settingDelete)
	f.handle(onBoth, "POST /user/default_device", false, f.defaultDevice)
	f.handle(onBoth, "POST /user/presence", false, f.presence)
	f.handle(onBoth, "POST /user/nethlink", false, f.nethlinkPost)
	f.handle(onBoth, "GET /user/nethlink", false, f.nethlinkGet)
	// NethLink's client names /user/all beside /user/endpoints/all;
	// nethcti-server has no such route: it is the same list.
	f.handle(onBoth, "GET /user/all", false, f.endpointsAll)
	f.handle(onBoth, "GET /astproxy/feature_codes", false, f.featureCodes)
	// What ctibridge has none of, said as nethcti-server says it: no
	// parameterized URL for the profile, no video sources (door
	// intercoms). phone-island reads both at start and does not catch a
	// failure of the sources' read.
	f.handle(onBoth, "GET /user/paramurl", false, none)
	f.handle(onBoth, "GET /streaming/sources", false, none)

	f.handle(onBoth, "GET /astproxy/extensions", false, func(w http.ResponseWriter, r *http.Request, id Identity, _ bool) int {
		return f.withUsernames(w, r, id, "/astproxy/extensions", false)
	})
	f.handle(onBoth, "GET /astproxy/extension/{exten}", false, func(w http.ResponseWriter, r *http.Request, id Identity, _ bool) int {
		return f.withUsernames(w, r, id, "/astproxy/extension/"+r.PathValue("exten"), true)
	})
	f.handle(onBoth, "GET /astproxy/queues", false, f.queues)
	f.handle(onBoth, "GET /astproxy/queue/{queue}", false, f.queues)
	f.handle(onBoth, "GET /astproxy/parkings", false, f.parkings)
	f.handle(onBoth, "GET /astproxy/queue_astats", false, f.queueAStats)
	for _, p := range []string{"GET /astproxy/qmanager_queues", "GET /astproxy/qmanager_qcalls_hist", "GET /astproxy/qmanager_qstats/{queue}",
		"GET /astproxy/qmanager_astats", "GET /astproxy/qalarms", "GET /astproxy/qrecall_info/{hours}/{number}/{queue}",
		"GET /astproxy/queue_recall/{hours}/{queues}/{outcome}", "GET /astproxy/qmanager_queue_recall/{hours}/{queues}/{outcome}"} {
		f.handle(onBoth, p, false, notQueueLog)
	}
	f.handle(onBoth, "POST /astproxy/{name}", false, f.action)
	f.handle(onAPI, "GET /history/calls", false, f.historyCalls)
	f.handle(onBoth, "GET /phonebook/search", false, f.pbSearch)
	f.handle(onBoth, "GET /phonebook/search/{$}", false, f.pbSearch)
	f.handle(onBoth, "GET /phonebook/search/{term}", false, f.pbSearch)
	f.handle(onBoth, "GET /phonebook/cticontact/{id}", false, f.ctiContact)
	f.handle(onBoth, "GET /phonebook/speeddials", false, f.speedDials)
	for _, p := range []string{"POST /phonebook/create", "POST /phonebook/modify_cticontact", "POST /phonebook/delete_cticontact"} {
		f.handle(onBoth, p, false, f.pbWrite)
	}

	// Served by the native API as they are (the same shapes, or shapes
	// the clients read as they are).
	for _, p := range []string{
		"GET /user/presence", "GET /user/presencelist", "GET /astproxy/trunks", "GET /astproxy/conversations", "GET /astproxy/conferences",
		"GET /astproxy/conference/{endpoint}", "GET /astproxy/cfcall/{type}/{endpoint}", "GET /astproxy/dnd/{endpoint}",
		"GET /voicemail/new_counters", "GET /phonebook/contact/{id}",
		"GET /historycall/interval/user/{username}/{from}/{to}", "GET /histcallswitch/interval/{from}/{to}",
	} {
		f.handle(onBoth, p, false, f.passThrough)
	}
	f.mux.HandleFunc(PrefixAPI+"/", notServed)
	f.mux.HandleFunc(PrefixWebrest+"/", notServed)
}

// notServed answers what the front does not serve with the native error
// JSON (404), so the clients log it as they would any refusal.
func notServed(w http.ResponseWriter, r *http.Request) {
	writeErr(w, r, apiError(http.StatusNotFound, "not_found", "not served by ctibridge's NethCTI front: "+r.Method+" "+r.URL.Path))
}

// none answers an empty object: nothing of the kind is configured.
func none(w http.ResponseWriter, _ *http.Request, _ Identity, _ bool) int {
	return writeJSON(w, http.StatusOK, struct{}{})
}

// passThrough serves a route by the native API at the same path.
func (f *Front) passThrough(w http.ResponseWriter, r *http.Request, id Identity, legacy bool) int {
	prefix := PrefixAPI
	if legacy {
		prefix = PrefixWebrest
	}
	return f.native(w, r, id, "", r.URL.Path[len(prefix):], nil)
}

// presence serves POST /user/presence {status, to}: NethCTI's body, read
// leniently, to the native route.
func (f *Front) presence(w http.ResponseWriter, r *http.Request, id Identity, _ bool) int {
	var q struct {
		Status flexString `json:"status"`
		To     flexString `json:"to"`
	}
	if err := decodeLenient(w, r, &q); err != nil {
		return writeErr(w, r, err)
	}
	return f.nativeJSON(w, r, id, "/user/presence", struct {
		Status string `json:"status"`
		To     string `json:"to,omitempty"`
	}{string(q.Status), string(q.To)})
}
