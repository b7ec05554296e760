package sio

import (
	"encoding/json"
	"testing"
)

// TestNethCTIExtension: chSource is the calling side, chDest the called
// one, by the conversation's direction; username is added; the engine's
// fields are kept.
func TestNethCTIExtension(t *testing.T) {
	in := `{"exten":"202","name":"Bob","status":"busy","conversations":{` +
		`"a":{"id":"a","owner":"202","direction":"in","counterpartNum":"0612345678","counterpartName":"Acme","inConference":false,"connected":true},` +
		`"b":{"id":"b","owner":"202","direction":"out","counterpartNum":"201","counterpartName":"Alice","inConference":true,"connected":false}}}`
	out, err := nethctiExtension([]byte(in), "bob")
	if err != nil {
		t.Fatal(err)
	}
	var x struct {
		Exten, Username, Status string
		Conversations           map[string]struct {
			Connected        bool
			ChSource, ChDest party
		}
	}
	if err := json.Unmarshal(out, &x); err != nil {
		t.Fatal(err)
	}
	if x.Exten != "202" || x.Username != "bob" || x.Status != "busy" {
		t.Errorf("extension %+v", x)
	}
	a, b := x.Conversations["a"], x.Conversations["b"]
	if want := (party{CallerNum: "0612345678", CallerName: "Acme"}); a.ChSource != want || a.ChDest != (party{CallerNum: "202", CallerName: "Bob"}) || !a.Connected {
		t.Errorf("incoming: %+v", a)
	}
	if b.ChSource != (party{CallerNum: "202", CallerName: "Bob", InConference: true}) || b.ChDest != (party{CallerNum: "201", CallerName: "Alice", InConference: true}) {
		t.Errorf("outgoing: %+v", b)
	}
	for _, bad := range []string{`[]`, `{"conversations":[]}`, `{"exten":"202"}`, `{`} {
		if _, err := nethctiExtension([]byte(bad), "bob"); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}
