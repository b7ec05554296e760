package auth

import (
	"encoding/json"
	"testing"
)

func TestViewRedacts(t *testing.T) {
	us := mustUsers(t)
	alice, _ := us.Lookup("alice")
	paula, _ := us.Lookup("paula")
	ext := `{"exten":"202","name":"Bob","status":"busy","conversations":{"PJSIP/202-1>PJSIP/9-2":{"id":"PJSIP/202-1>PJSIP/9-2","counterpartNum":"0721 \"405\" \\516","counterpartName":"Mario, {Rossi}","duration":5,"connected":true}}}`
	oid := OpaqueConvID("PJSIP/202-1>PJSIP/9-2")
	want := `{"exten":"202","name":"Bob","status":"busy","conversations":{"` + oid + `":{"id":"` + oid + `","counterpartNum":"","counterpartName":"","duration":5,"connected":true}}}`
	if got := string(ViewOf(alice).Extension("202", []byte(ext))); got != want {
		t.Errorf("alice sees\n%s\nwant\n%s", got, want)
	}
	if got := string(ViewOf(alice).Extension("201", []byte(ext))); got != ext {
		t.Error("own extension redacted")
	}
	if got := string(ViewOf(paula).Extension("202", []byte(ext))); got != ext {
		t.Error("operator_panel view redacted")
	}
	queue := `{"queue":"401","name":"Support","members":{"201":{"member":"201","name":"Alice"}},"waitingCallers":{"PJSIP/t-1":{"channel":"PJSIP/t-1","num":"0612","name":"Caller","position":1}},"completed":1}`
	och := OpaqueChannel("PJSIP/t-1")
	wantQ := `{"queue":"401","name":"Support","members":{"201":{"member":"201","name":"Alice"}},"waitingCallers":{"` + och + `":{"channel":"` + och + `","num":"","name":"","position":1}},"completed":1}`
	if got := string(ViewOf(alice).Queue([]byte(queue))); got != wantQ {
		t.Errorf("queue:\n%s", got)
	}
	park := `{"parking":"701","name":"701","timeout":45,"parkedCaller":{"channel":"c","num":"0612","name":"P","parkedAt":1,"parkedBy":"201"}}`
	wantP := `{"parking":"701","name":"701","timeout":45,"parkedCaller":{"channel":"` + OpaqueChannel("c") + `","num":"","name":"","parkedAt":1,"parkedBy":"201"}}`
	if got := string(ViewOf(alice).Parking([]byte(park))); got != wantP {
		t.Errorf("parking:\n%s", got)
	}
	free := `{"parking":"702","name":"702","timeout":45,"parkedCaller":null}`
	if got := string(ViewOf(alice).Parking([]byte(free))); got != free {
		t.Errorf("free parking: %s", got)
	}
	for _, bad := range []string{`{"a":`, `{"conversations":{"x":{"counterpartNum":"1`, `{"a" 1}`, ``, `{"a":[1,}`} {
		got := redact([]byte(bad), convRule)
		if string(got) != "{}" {
			t.Errorf("redact(%q) = %q", bad, got)
		}
	}
	if !json.Valid(redact([]byte(ext), convRule)) {
		t.Error("invalid output")
	}
	if ViewOf(alice).Key() != "u:201" || ViewOf(nil).Full() || ViewOf(paula).Key() != "" {
		t.Error("keys")
	}
}

func TestOpaque(t *testing.T) {
	a, b := OpaqueChannel("Local/0612345678@from-internal-0000002a;1"), OpaqueChannel("PJSIP/trunk-0000000a")
	if a == b || len(a) != 21 || a[0] != '~' || a != OpaqueChannel("Local/0612345678@from-internal-0000002a;1") {
		t.Errorf("opaque channels %q %q", a, b)
	}
	if got := OpaqueConvID("Local/0612345678@from-internal-0000002a;1>PJSIP/trunk-0000000a"); got != a+">"+b {
		t.Errorf("conv id %q", got)
	}
	if got := OpaqueConvID(">PJSIP/trunk-0000000a"); got != ">"+b || !IsOpaque(got) || !IsOpaque(a) || IsOpaque("PJSIP/201-1>") {
		t.Errorf("one-sided conv id %q", got)
	}
	if OpaqueChannel("") != "" || OpaqueConvID("") != "" {
		t.Error("empty names")
	}
}

func TestViewConference(t *testing.T) {
	us := mustUsers(t)
	alice, _ := us.Lookup("alice")
	paula, _ := us.Lookup("paula")
	room := `{"id":"1000","locked":false,"users":{"1.1":{"id":"1.1","name":"Alice","owner":true,"muted":false,"talking":false,"extenId":"201","joinTime":1},` +
		`"1.2":{"id":"1.2","name":"Mario Rossi","owner":false,"muted":false,"talking":true,"extenId":"0612345678","joinTime":2}}}`
	want := `{"id":"1000","locked":false,"users":{"1.1":{"id":"1.1","name":"Alice","owner":true,"muted":false,"talking":false,"extenId":"201","joinTime":1},` +
		`"1.2":{"id":"1.2","name":"","owner":false,"muted":false,"talking":true,"extenId":"","joinTime":2}}}`
	if got := string(ViewOf(alice).Conference([]byte(room))); got != want {
		t.Errorf("alice sees\n%s\nwant\n%s", got, want)
	}
	if got := string(ViewOf(paula).Conference([]byte(room))); got != room {
		t.Errorf("operator_panel sees %s", got)
	}
}
