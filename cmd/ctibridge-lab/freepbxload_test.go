package main

import (
	"cmp"
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/pbxsim"
)

// TestFreePBXLoadTopologies: e2e's freepbx plan load rings its callees
// through FreePBX's topologies: the first through the queue's Local
// member (Local/<c>@from-queue), every third from the second through a
// ring group of its own (Local/<c>@from-internal), every third from the
// third with its second device (PJSIP/9<c>) beside it; Dial maps the
// callee to the number its caller dials.
func TestFreePBXLoadTopologies(t *testing.T) {
	var exts []pbxsim.Extension
	for i := range 8 {
		exts = append(exts, pbxsim.Extension{Number: strconv.Itoa(3000 + i)})
	}
	callees := []string{"3004", "3005", "3006", "3007"}
	cfg := pbxsim.Config{SIPAddr: "127.0.0.1:0", AMIAddr: "127.0.0.1:0", Extensions: exts, Plan: pbxsim.PlanFreePBX}
	dial, devices := freepbxLoad(&cfg, callees)
	if dial["3004"] != "620" || dial["3005"] != "63005" || dial["3006"] != "" || dial["3007"] != "" || !slices.Equal(devices, []string{"93006"}) {
		t.Fatalf("dial %v, devices %v", dial, devices)
	}
	pbx, err := pbxsim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go pbx.Run(ctx)
	phone := func(x string, noAnswer bool) *pbxsim.Phone {
		ph, err := pbxsim.NewPhone(pbxsim.PhoneConfig{Exten: x, Server: pbx.SIPAddr(), NoAnswer: noAnswer})
		if err != nil {
			t.Fatal(err)
		}
		go ph.Run(ctx)
		if err := ph.Register(ctx, time.Hour); err != nil {
			t.Fatal(err)
		}
		return ph
	}
	for _, c := range append(slices.Clone(callees), devices...) {
		phone(c, true)
	}
	want := map[string]string{"3004": "Local/3004@from-queue-", "3005": "Local/3005@from-internal-", "3006": "PJSIP/93006-", "3007": "PJSIP/3007-"}
	for i, c := range callees {
		caller := phone(strconv.Itoa(3000+i), false)
		cctx, cc := context.WithCancel(ctx)
		go caller.Call(cctx, cmp.Or(dial[c], c))
		deadline := time.Now().Add(5 * time.Second)
		for !slices.ContainsFunc(pbx.Channels(), func(n string) bool { return strings.HasPrefix(n, want[c]) }) {
			if time.Now().After(deadline) {
				t.Fatalf("calling %s for %s: channels %v, want one %s...", cmp.Or(dial[c], c), c, pbx.Channels(), want[c])
			}
			time.Sleep(20 * time.Millisecond)
		}
		cc()
	}
}
