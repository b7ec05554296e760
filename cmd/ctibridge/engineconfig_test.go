package main

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
)

// The engine serve builds writes channel names by auth's opaque names in
// the NumbersHidden class: the ones actions accept back (rest resolves
// auth.OpaqueConvID). Without Config.Opaque the class would leave them
// empty and no filtered client could match a conversation.
func TestEngineConfigOpaqueNames(t *testing.T) {
	cfg := engineConfig(&serveConfig{}, bridgeIn{names: map[string]string{"201": "Alice"}, log: slog.New(slog.DiscardHandler)}, nil, nil)
	if cfg.Opaque == nil {
		t.Fatal("no Opaque in the engine's configuration")
	}
	e := calls.New(cfg)
	e.Apply(ami.NewMessage(ami.Header{Key: "Event", Value: "Newchannel"}, ami.Header{Key: "Channel", Value: "PJSIP/201-00000001"},
		ami.Header{Key: "ChannelState", Value: "4"}, ami.Header{Key: "CallerIDNum", Value: "201"}, ami.Header{Key: "Exten", Value: "0612345678"},
		ami.Header{Key: "Context", Value: "from-internal"}, ami.Header{Key: "Uniqueid", Value: "1.1"}, ami.Header{Key: "Linkedid", Value: "1.1"}))
	s := e.Publish()
	full, hid := string(s.ExtensionJSON("201")), string(s.ExtensionJSONAs("201", calls.NumbersHidden))
	if !strings.Contains(full, "PJSIP/201-00000001") {
		t.Fatalf("no conversation in %s", full)
	}
	if want := auth.OpaqueChannel("PJSIP/201-00000001"); !strings.Contains(hid, `"id":"`+want) || strings.Contains(hid, "PJSIP/") {
		t.Errorf("hidden extension %s, want ids by %s", hid, want)
	}
}
