package auth

import "github.com/ctibridge/ctibridge/calls"

// View is what one user may see of the live state. REST and the WebSocket
// hub both ask it, so they filter alike; neither touches JSON: the calls
// engine encodes every entity once per visibility class (calls.Class),
// and a reader picks the bytes of the class View gives it.
//
// What is hidden (docs/design.md "Users and permissions": the numbers and
// names in other people's calls) is what calls.NumbersHidden hides: in an
// extension, unless the user may see its calls (SeeCalls on it), and in a
// trunk, a queue's waiting callers and a parked caller, unless the user
// sees calls no extension owns (SeeCalls on ""). A conference hides its
// members one by one (SeesMember). Presence is never hidden.
type View struct {
	u *User
}

// ViewOf returns the view of u.
func ViewOf(u *User) View { return View{u} }

// Full reports whether the view hides nothing.
func (v View) Full() bool { return v.u != nil && v.u.viewKey == "" }

// Key names the view: equal keys see equal bytes ("" hides nothing).
// Conferences are the exception: SeesMember depends on the user itself.
func (v View) Key() string {
	if v.u == nil {
		return "nobody"
	}
	return v.u.viewKey
}

// SeesCalls reports whether the view shows the calls of owner (an
// extension; "" for the calls no extension owns: trunks, queues' waiting
// callers, parked callers) in full.
func (v View) SeesCalls(owner string) bool { return Allowed(v.u, SeeCalls, owner) }

// Class is the class of the JSON the view shows of owner's calls (as
// SeesCalls).
func (v View) Class(owner string) calls.Class {
	if v.SeesCalls(owner) {
		return calls.Full
	}
	return calls.NumbersHidden
}

// FullExtensions lists, sorted, the extensions whose calls a view that is
// not Full shows in full (its scope, with the permission to see numbers):
// the ones calls.Snapshot.ExtensionsFor puts in full into the hidden
// collection.
func (v View) FullExtensions() []string {
	var out []string
	if v.u == nil {
		return nil
	}
	for _, e := range v.u.Scope() {
		if v.SeesCalls(e) {
			out = append(out, e)
		}
	}
	return out
}

// SeesMember reports whether the view shows a conference member on
// extension exten (an outside caller's member carries its number) in
// full: as calls.Snapshot.ConferenceJSONFor asks.
func (v View) SeesMember(exten string) bool {
	return v.SeesCalls("") || exten != "" && v.SeesCalls(exten)
}
