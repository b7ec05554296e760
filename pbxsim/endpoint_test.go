package pbxsim

import (
	"reflect"
	"strings"
	"testing"

	"github.com/ctibridge/ctibridge/ami"
)

// TestProofEndpointDetails: PJSIPShowEndpoint answers as in
// endpoint_details: the same items with the same headers in the same
// order, and the endpoint's caller ID with its name.
func TestProofEndpointDetails(t *testing.T) {
	exts := []Extension{{"201", "Alice Rossi"}, {"202", "Bob Bianchi"}, {"203", "Carol Verdi"}, {"204", "Dave Neri"}, {"205", "Eve Bruno"}}
	p := startPBX(t, Config{Extensions: exts})
	for _, x := range []string{"201", "202", "203", "204"} {
		startPhone(t, p, PhoneConfig{Exten: x})
	}
	capt := startCapture(t, p.AMIAddr())
	rec := readRecording(t, "endpoint_details")
	for i, ep := range []string{"201", "202", "203", "204", "205"} {
		id := "pjsipshowendpoint-" + string(rune('3'+i))
		res, err := capt.cli.Do(ctx5(t), ami.NewAction("PJSIPShowEndpoint", "ActionID", id, "Endpoint", ep))
		if err != nil {
			t.Fatalf("%s: %v", ep, err)
		}
		var want []ami.Message
		for _, m := range rec {
			if m.ActionID() == id && m.Event() != "" && m.Event() != "EndpointDetailComplete" {
				want = append(want, m)
			}
		}
		got := res.Items
		if len(got) > 0 && got[len(got)-1].Event() == "EndpointDetailComplete" {
			got = got[:len(got)-1]
		}
		if w, g := shapes(want), shapes(got); !reflect.DeepEqual(w, g) {
			t.Errorf("endpoint %s:\nrecording: %q\npbxsim:    %q", ep, w, g)
		}
		if w, g := want[0].Get("Callerid"), got[0].Get("Callerid"); w != g {
			t.Errorf("endpoint %s Callerid %q, want %q", ep, g, w)
		}
	}
	if res, err := capt.cli.Do(ctx5(t), ami.NewAction("PJSIPShowEndpoint", "Endpoint", "999")); err == nil || res.Get("Message") != "Unable to retrieve endpoint 999" {
		t.Errorf("unknown endpoint: %v %v", res, err)
	}
}

// shapes is, per item, its event and header names in order.
func shapes(msgs []ami.Message) []string {
	var out []string
	for _, m := range msgs {
		var keys []string
		for _, h := range m.Headers() {
			keys = append(keys, h.Key)
		}
		out = append(out, strings.Join(keys, ","))
	}
	return out
}
