package calls

// EncodeAs is the JSON of v (*Extension, *Trunk, *Queue, *Parking or
// *Conference) in class c, as Publish and the snapshot's NumbersHidden
// bytes encode it, for the tests in package calls_test.
func EncodeAs(v any, at int64, c Class, op Opaquer) []byte {
	e := enc{hide: c != Full, op: op}
	switch v := v.(type) {
	case *Extension:
		return appendExtension(nil, v, at, e)
	case *Trunk:
		return appendTrunk(nil, v, at, e)
	case *Queue:
		return appendQueue(nil, v, at, e)
	case *Parking:
		return appendParking(nil, v, at, e)
	case *Conference:
		return appendConference(nil, v, at, e)
	}
	return nil
}

// EncodeConferenceFor is room c as Snapshot.ConferenceJSONFor writes it.
func EncodeConferenceFor(c *Conference, op Opaquer, sees func(string) bool) []byte {
	return conferenceFor(newEnt(*c, 0, op, appendConference, 0), sees)
}
