package site

import (
	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/calls"
)

// PBXConfig is PBX pbx's engine configuration ("" the default PBX) from
// ecfg, made for all: the names and cellphones the users file gives its
// endpoints, which are written qualified for a named PBX ("site2:201"),
// by its own ids ("201"), so that a named PBX's extensions get their
// users' names and cellphones and the default PBX gets no extension
// "site2:201"; a ringing caller named for the rung extension's users by
// its combined id (calls.QualifyID), as they own it. known says which
// names are named PBXs'.
func PBXConfig(ecfg calls.Config, pbx string, known func(string) bool) calls.Config {
	ecfg.Names, ecfg.Cellphones = ofPBX(ecfg.Names, pbx, known), ofPBX(ecfg.Cellphones, pbx, known)
	if ring := ecfg.RingLookup; ring != nil && pbx != "" {
		ecfg.RingLookup = func(exten, number string) string { return ring(calls.QualifyID(pbx, exten), number) }
	}
	return ecfg
}

// ofPBX is m's entries whose keys are PBX pbx's combined ids, keyed by
// that PBX's own ids.
func ofPBX(m map[string]string, pbx string, known func(string) bool) map[string]string {
	out := make(map[string]string)
	for k, v := range m {
		if p, local := calls.SplitID(k, known); p == pbx {
			out[local] = v
		}
	}
	return out
}

// QualifyCDRs hands the history recorder a named PBX's messages with
// their Uniqueid and Linkedid qualified ("site2:1796028439.12"): the
// recorder's key is (uniqueid, sequence), and two PBXs' Uniqueids may be
// equal; the qualified ids also say which PBX a history row comes from.
// A CDR's source and destination are qualified when they are one of the
// PBX's extensions (eng's), as the users' endpoints are: a user's
// personal history matches them, so 201 of the default PBX does not see
// the calls of site2:201, and site2:201's user does.
func QualifyCDRs(pbx string, eng *calls.Engine, observe func(ami.Message)) func(ami.Message) {
	return func(m ami.Message) {
		for _, k := range []string{"UniqueID", "LinkedID"} { // header names are case-insensitive: Uniqueid too
			if v, ok := m.Lookup(k); ok && v != "" {
				m = m.Set(k, calls.QualifyID(pbx, v))
			}
		}
		if m.Event() == ami.EventCdr {
			exts := eng.Snapshot().Extensions
			for _, k := range []string{"Source", "Destination"} {
				if v := m.Get(k); v != "" {
					if _, ok := exts.Lookup(v); ok {
						m = m.Set(k, calls.QualifyID(pbx, v))
					}
				}
			}
		}
		observe(m)
	}
}
