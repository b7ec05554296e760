package pbxsim

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/ami/amitest"
)

// The freepbx plan's proofs: the third set of recordings (a real
// Asterisk 22 running a FreePBX/NethVoice-style dialplan, kept in
// calls/testdata) and pbxsim running the same scenario give the same
// topo: per channel (named by role, ids dropped), the sequence of the
// events that make the topology (Newchannel, Newstate, DialBegin and
// DialEnd with their destinations, bridges, queue and agent events,
// Hangup causes), and the LocalBridge pairs. The expected topo below
// are written by hand from the recordings' .md and transcripts; each
// test checks them against the recording first, then against pbxsim.

// readAMI3 reads a recording of the third set.
func readAMI3(t testing.TB, name string) []ami.Message {
	t.Helper()
	return amitest.ReadRecording(t, "../calls/testdata/"+name+".ami")
}

var (
	localSeqRE = regexp.MustCompile(`^(Local/[^@]+@[^-]+(?:-[a-z]+)*)-[0-9a-f]{8}(;[12])$`)
	pjsipSeqRE = regexp.MustCompile(`^(PJSIP/[^-]+)-[0-9a-f]{8}$`)
)

// topo is msgs' topology: for each channel role (PJSIP/201,
// Local/203@from-internal;1; a role's second channel gets "#2"), its
// events in order; under "LocalBridge" the pairs bridged; under
// "Bridges" who entered which bridge, in order.
type topo map[string][]string

func shapesOf(msgs []ami.Message) topo {
	out := topo{}
	role := map[string]string{} // channel name -> role
	seen := map[string]int{}
	bridges := map[string]string{}
	norm := func(ch string) string {
		if r, ok := role[ch]; ok {
			return r
		}
		r := ch
		if m := localSeqRE.FindStringSubmatch(ch); m != nil {
			r = m[1] + m[2]
		} else if m := pjsipSeqRE.FindStringSubmatch(ch); m != nil {
			r = m[1]
		}
		seen[r]++
		if seen[r] > 1 {
			r = fmt.Sprintf("%s#%d", r, seen[r])
		}
		role[ch] = r
		return r
	}
	bridge := func(id string) string {
		if b, ok := bridges[id]; ok {
			return b
		}
		bridges[id] = fmt.Sprintf("b%d", len(bridges)+1)
		return bridges[id]
	}
	dialString := func(s string) string {
		if i := strings.Index(s, "/sip:"); i >= 0 {
			return s[:i] + "/sip:"
		}
		return s
	}
	for _, m := range msgs {
		if m.Kind() != ami.KindEvent || m.ActionID() != "" {
			continue
		}
		ch := m.Get("Channel")
		var s string
		switch ev := m.Event(); ev {
		case "Newchannel":
			s = ev
		case "Newstate":
			s = ev + " " + m.Get("ChannelState")
		case "DialBegin":
			s = ev + ">" + norm(m.Get("DestChannel")) + " " + dialString(m.Get("DialString"))
		case "DialEnd":
			s = ev + ">" + norm(m.Get("DestChannel")) + " " + m.Get("DialStatus")
		case "BridgeCreate":
			bridge(m.Get("BridgeUniqueid"))
			continue
		case "BridgeEnter", "BridgeLeave":
			s = ev + " " + bridge(m.Get("BridgeUniqueid"))
			if ev == "BridgeEnter" && ch != "" {
				out["Bridges"] = append(out["Bridges"], bridge(m.Get("BridgeUniqueid"))+"+"+norm(ch))
			}
		case "Hangup":
			s = ev + " " + m.Get("Cause")
		case "AgentCalled", "AgentConnect":
			s = ev + ">" + norm(m.Get("DestChannel")) + " " + m.Get("Interface")
		case "AgentComplete":
			s = ev + ">" + norm(m.Get("DestChannel")) + " " + m.Get("Interface") + " " + m.Get("Reason")
		case "QueueCallerJoin", "QueueCallerLeave":
			s = ev + " " + m.Get("Position") + "/" + m.Get("Count")
		case "LocalBridge":
			out["LocalBridge"] = append(out["LocalBridge"], norm(m.Get("LocalOneChannel"))+" "+norm(m.Get("LocalTwoChannel"))+" "+m.Get("LocalOptimization"))
			continue
		default:
			continue
		}
		if ch == "" {
			continue
		}
		r := norm(ch)
		out[r] = append(out[r], s)
	}
	return out
}

// checkTopo compares got's topo with want, role by role.
func checkTopo(t *testing.T, what string, want, got topo) {
	t.Helper()
	for r, w := range want {
		if !reflect.DeepEqual(w, got[r]) {
			t.Errorf("%s: %s:\nwant %q\ngot  %q", what, r, w, got[r])
		}
	}
	for r := range got {
		if _, ok := want[r]; !ok {
			t.Errorf("%s: unexpected channel %s: %q", what, r, got[r])
		}
	}
}

// ringgroupShapes: ringgroup_local.md, moments 1-5.
var ringgroupShapes = topo{
	"PJSIP/201": {"Newchannel",
		"DialBegin>Local/202@from-internal;1 202@from-internal/n",
		"DialBegin>Local/203@from-internal;1 203@from-internal/n",
		"DialBegin>Local/204@from-internal;1 204@from-internal/n",
		"DialEnd>Local/202@from-internal;1 CANCEL", "DialEnd>Local/204@from-internal;1 CANCEL",
		"DialEnd>Local/203@from-internal;1 ANSWER", "Newstate 6", "BridgeEnter b2", "BridgeLeave b2", "Hangup 16"},
	"Local/202@from-internal;1": {"Newchannel", "Newstate 5", "Hangup 26"},
	"Local/202@from-internal;2": {"Newchannel", "DialBegin>PJSIP/202 202/sip:", "DialEnd>PJSIP/202 CANCEL", "Hangup 26"},
	"PJSIP/202":                 {"Newchannel", "Newstate 5", "Hangup 26"},
	"Local/204@from-internal;1": {"Newchannel", "Newstate 5", "Hangup 26"},
	"Local/204@from-internal;2": {"Newchannel", "DialBegin>PJSIP/204 204/sip:", "DialEnd>PJSIP/204 CANCEL", "Hangup 26"},
	"PJSIP/204":                 {"Newchannel", "Newstate 5", "Hangup 26"},
	"Local/203@from-internal;1": {"Newchannel", "Newstate 5", "Newstate 6", "BridgeEnter b2", "BridgeLeave b2", "Hangup 16"},
	"Local/203@from-internal;2": {"Newchannel", "DialBegin>PJSIP/203 203/sip:", "DialEnd>PJSIP/203 ANSWER", "Newstate 6",
		"BridgeEnter b1", "BridgeLeave b1", "Hangup 16"},
	"PJSIP/203": {"Newchannel", "Newstate 5", "Newstate 6", "BridgeEnter b1", "BridgeLeave b1", "Hangup 16"},
	"Bridges":   {"b1+PJSIP/203", "b1+Local/203@from-internal;2", "b2+Local/203@from-internal;1", "b2+PJSIP/201"},
	"LocalBridge": {"Local/202@from-internal;1 Local/202@from-internal;2 No",
		"Local/203@from-internal;1 Local/203@from-internal;2 No",
		"Local/204@from-internal;1 Local/204@from-internal;2 No"},
}

// queueLocalShapes: queue_local_members.md, moments 2-6.
var queueLocalShapes = topo{
	"PJSIP/trunk": {"Newchannel", "Newstate 6", "QueueCallerJoin 1/1",
		"AgentCalled>Local/202@from-queue;1 Local/202@from-queue/n", "DialBegin>Local/202@from-queue;1 Local/202@from-queue/n",
		"AgentCalled>Local/203@from-queue;1 Local/203@from-queue/n", "DialBegin>Local/203@from-queue;1 Local/203@from-queue/n",
		"DialEnd>Local/203@from-queue;1 ANSWER",
		"DialEnd>Local/202@from-queue;1 CANCEL", "DialEnd>Local/202@from-queue;1 CANCEL",
		"QueueCallerLeave 1/0", "AgentConnect>Local/203@from-queue;1 Local/203@from-queue/n", "BridgeEnter b2",
		"AgentComplete>Local/203@from-queue;1 Local/203@from-queue/n caller", "BridgeLeave b2", "Hangup 16"},
	"Local/202@from-queue;1": {"Newchannel", "Newstate 5", "Hangup 26"},
	"Local/202@from-queue;2": {"Newchannel", "DialBegin>PJSIP/202 202/sip:", "DialEnd>PJSIP/202 CANCEL", "Hangup 26"},
	"PJSIP/202":              {"Newchannel", "Newstate 5", "Hangup 26"},
	"Local/203@from-queue;1": {"Newchannel", "Newstate 5", "Newstate 6", "BridgeEnter b2", "BridgeLeave b2", "Hangup 16"},
	"Local/203@from-queue;2": {"Newchannel", "DialBegin>PJSIP/203 203/sip:", "DialEnd>PJSIP/203 ANSWER", "Newstate 6",
		"BridgeEnter b1", "BridgeLeave b1", "Hangup 16"},
	"PJSIP/203": {"Newchannel", "Newstate 5", "Newstate 6", "BridgeEnter b1", "BridgeLeave b1", "Hangup 16"},
	"Bridges":   {"b1+PJSIP/203", "b1+Local/203@from-queue;2", "b2+Local/203@from-queue;1", "b2+PJSIP/trunk"},
	"LocalBridge": {"Local/202@from-queue;1 Local/202@from-queue;2 No",
		"Local/203@from-queue;1 Local/203@from-queue;2 No"},
}

// multiDeviceShapes: multi_device_user.md, moments 3-9.
var multiDeviceShapes = topo{
	"PJSIP/202": {"Newchannel", "DialBegin>PJSIP/201 201/sip:", "DialBegin>PJSIP/91201 91201/sip:",
		"DialEnd>PJSIP/201 CANCEL", "DialEnd>PJSIP/91201 ANSWER", "Newstate 6", "BridgeEnter b1", "BridgeLeave b1", "Hangup 16"},
	"PJSIP/201":   {"Newchannel", "Newstate 5", "Hangup 26"},
	"PJSIP/91201": {"Newchannel", "Newstate 5", "Newstate 6", "BridgeEnter b1", "BridgeLeave b1", "Hangup 16"},
	"PJSIP/91201#2": {"Newchannel", "DialBegin>PJSIP/203 203/sip:", "DialEnd>PJSIP/203 ANSWER", "Newstate 6",
		"BridgeEnter b2", "BridgeLeave b2", "Hangup 16"},
	"PJSIP/203": {"Newchannel", "Newstate 5", "Newstate 6", "BridgeEnter b2", "BridgeLeave b2", "Hangup 16"},
	"Bridges":   {"b1+PJSIP/91201", "b1+PJSIP/202", "b2+PJSIP/203", "b2+PJSIP/91201#2"},
}

// callerIDs is each channel role's caller number at its Newchannel.
func callerIDs(msgs []ami.Message) map[string]string {
	out := map[string]string{}
	for _, m := range msgs {
		if m.Event() == "Newchannel" {
			if n := pjsipSeqRE.FindStringSubmatch(m.Get("Channel")); n != nil {
				out[n[1]] = m.Get("CallerIDNum")
			}
		}
	}
	return out
}

func freepbxPBX(t *testing.T) *PBX {
	return startPBX(t, Config{Plan: PlanFreePBX, RingTimeout: 5 * time.Second})
}

// TestProofRingGroupLocal drives ringgroup_local: Alice 201 calls ring
// group 610; 202, 203, 204 ring through their Local pairs; Carol 203
// answers; Alice hangs up.
func TestProofRingGroupLocal(t *testing.T) {
	rec := readAMI3(t, "ringgroup_local")
	checkTopo(t, "recording", ringgroupShapes, shapesOf(rec))
	got, _ := runRingGroup(t)
	checkTopo(t, "pbxsim", ringgroupShapes, shapesOf(got))
	checkCdrs(t, rec, got)
}

// runRingGroup runs ringgroup_local's scenario on pbxsim.
func runRingGroup(t *testing.T) ([]ami.Message, *capture) {
	p := freepbxPBX(t)
	alice := startPhone(t, p, PhoneConfig{Exten: "201"})
	startPhone(t, p, PhoneConfig{Exten: "202", NoAnswer: true})
	startPhone(t, p, PhoneConfig{Exten: "203", RingTime: 300 * time.Millisecond})
	startPhone(t, p, PhoneConfig{Exten: "204", NoAnswer: true})
	capt := startCapture(t, p.AMIAddr())
	call, err := alice.Call(ctx5(t), "610")
	if err != nil {
		t.Fatal(err)
	}
	capt.waitFor(t, "bridged", func(m []ami.Message) bool { return count(m, "BridgeEnter") == 4 })
	if got := p.Channels(); len(got) != 4 {
		t.Errorf("channels while talking %v, want 4 (201, the Local/203 pair, 203)", got)
	}
	call.Hangup(ctx5(t))
	waitNoChannels(t, p)
	return capt.waitFor(t, "the hangups", func(m []ami.Message) bool { return count(m, "Hangup") == 10 && count(m, "Cdr") == 6 }), capt
}

// checkCdrs compares the Cdrs' (channel role, destination, destination
// channel role, application, disposition), as sets.
func checkCdrs(t *testing.T, rec, got []ami.Message) {
	t.Helper()
	key := func(msgs []ami.Message) []string {
		var out []string
		for _, m := range msgs {
			if m.Event() != "Cdr" {
				continue
			}
			r := func(ch string) string {
				if n := localSeqRE.FindStringSubmatch(ch); n != nil {
					return n[1] + n[2]
				}
				if n := pjsipSeqRE.FindStringSubmatch(ch); n != nil {
					return n[1]
				}
				return ch
			}
			out = append(out, strings.Join([]string{r(m.Get("Channel")), m.Get("Destination"), r(m.Get("DestinationChannel")),
				m.Get("LastApplication"), m.Get("Disposition")}, " "))
		}
		slices.Sort(out)
		return out
	}
	if w, g := key(rec), key(got); !reflect.DeepEqual(w, g) {
		t.Errorf("Cdrs:\nrecording %q\npbxsim    %q", w, g)
	}
}

// TestProofQueueLocalMembers drives queue_local_members: a trunk caller
// dials the DID of queue 620; its Local members 202 and 203 ring; Carol
// answers; the caller hangs up. QueueStatus shows the Local members
// with their hints as state interfaces.
func TestProofQueueLocalMembers(t *testing.T) {
	rec := readAMI3(t, "queue_local_members")
	checkTopo(t, "recording", queueLocalShapes, shapesOf(rec))
	got, _ := runQueueLocal(t)
	checkTopo(t, "pbxsim", queueLocalShapes, shapesOf(got))
	checkCdrs(t, rec, got)
	for _, m := range got {
		if m.Event() == "QueueMemberStatus" && (!strings.HasPrefix(m.Get("Interface"), "Local/") || !strings.HasPrefix(m.Get("StateInterface"), "hint:")) {
			t.Errorf("QueueMemberStatus Interface %q StateInterface %q, want Local/... and hint:...", m.Get("Interface"), m.Get("StateInterface"))
		}
	}
}

// runQueueLocal runs queue_local_members' scenario on pbxsim.
func runQueueLocal(t *testing.T) ([]ami.Message, *capture) {
	p := freepbxPBX(t)
	startPhone(t, p, PhoneConfig{Exten: "202", NoAnswer: true})
	startPhone(t, p, PhoneConfig{Exten: "203", RingTime: 300 * time.Millisecond})
	capt := startCapture(t, p.AMIAddr())
	res, err := capt.cli.Do(ctx5(t), ami.NewAction("QueueStatus", "Queue", "620"))
	if err != nil {
		t.Fatal(err)
	}
	members := map[string]string{}
	for _, it := range res.Items {
		if it.Event() == "QueueMember" {
			members[it.Get("Location")] = it.Get("StateInterface")
		}
	}
	if want := map[string]string{"Local/202@from-queue/n": "hint:202@ext-local", "Local/203@from-queue/n": "hint:203@ext-local"}; !reflect.DeepEqual(members, want) {
		t.Errorf("QueueStatus members %v, want %v (queue_local_members moment 1)", members, want)
	}
	trunk := startPhoneNoReg(t, p, PhoneConfig{Exten: "0612345678", Name: "Mario Rossi"})
	call, err := trunk.Call(ctx5(t), "0612340620")
	if err != nil {
		t.Fatal(err)
	}
	capt.waitFor(t, "agent connected", func(m []ami.Message) bool { return count(m, "BridgeEnter") == 4 })
	call.Hangup(ctx5(t))
	waitNoChannels(t, p)
	return capt.waitFor(t, "the hangups", func(m []ami.Message) bool { return count(m, "Hangup") == 7 && count(m, "Cdr") == 4 }), capt
}

// TestProofMultiDeviceUser drives multi_device_user: Bob calls Alice
// 201, whose devices 201 and 91201 both ring; 91201 answers; Bob hangs
// up; then Alice calls Carol from 91201. Every device channel carries
// the user's caller ID, and the AstDB answers who owns 91201.
func TestProofMultiDeviceUser(t *testing.T) {
	rec := readAMI3(t, "multi_device_user")
	checkTopo(t, "recording", multiDeviceShapes, shapesOf(rec))
	got, _ := runMultiDevice(t)
	checkTopo(t, "pbxsim", multiDeviceShapes, shapesOf(got))
	checkCdrs(t, rec, got)
	if ids := callerIDs(got); ids["PJSIP/91201"] != "201" || ids["PJSIP/201"] != "201" {
		t.Errorf("device channels' caller numbers %v, want 201 for PJSIP/201 and PJSIP/91201", ids)
	}
	hint := ""
	for _, m := range got {
		if m.Event() == "ExtensionStatus" && m.Get("Exten") == "201" {
			hint = m.Get("Hint")
		}
		if m.Event() == "ExtensionStatus" && m.Get("Exten") == "91201" {
			t.Errorf("ExtensionStatus for the device 91201: a device has no hint")
		}
	}
	if hint != "PJSIP/201&PJSIP/91201" {
		t.Errorf("hint of 201 %q, want PJSIP/201&PJSIP/91201", hint)
	}
}

// runMultiDevice runs multi_device_user's scenario on pbxsim, with the
// AstDB checks of its devices.
func runMultiDevice(t *testing.T) ([]ami.Message, *capture) {
	p := freepbxPBX(t)
	startPhone(t, p, PhoneConfig{Exten: "201", NoAnswer: true})
	dev := startPhone(t, p, PhoneConfig{Exten: "91201", RingTime: 300 * time.Millisecond})
	bob := startPhone(t, p, PhoneConfig{Exten: "202"})
	startPhone(t, p, PhoneConfig{Exten: "203", RingTime: 200 * time.Millisecond})
	capt := startCapture(t, p.AMIAddr())
	for key, want := range map[string]string{"DEVICE/91201/user": "201", "AMPUSER/201/device": "201&91201"} {
		fam, k, _ := strings.Cut(key, "/")
		res, err := capt.cli.Do(ctx5(t), ami.NewAction("DBGet", "Family", fam, "Key", k))
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Items) == 0 || res.Items[0].Get("Val") != want {
			t.Errorf("DBGet %s: %v, want %s", key, res.Items, want)
		}
	}
	call, err := bob.Call(ctx5(t), "201")
	if err != nil {
		t.Fatal(err)
	}
	capt.waitFor(t, "bridged", func(m []ami.Message) bool { return count(m, "BridgeEnter") == 2 })
	call.Hangup(ctx5(t))
	waitNoChannels(t, p)
	call, err = dev.Call(ctx5(t), "203")
	if err != nil {
		t.Fatal(err)
	}
	capt.waitFor(t, "bridged", func(m []ami.Message) bool { return count(m, "BridgeEnter") == 4 })
	call.Hangup(ctx5(t))
	waitNoChannels(t, p)
	return capt.waitFor(t, "the hangups", func(m []ami.Message) bool { return count(m, "Hangup") == 5 && count(m, "Cdr") == 3 }), capt
}
