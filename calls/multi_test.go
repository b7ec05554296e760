package calls

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
)

// twoPBXs is a default PBX and a PBX named site2 fed the same messages,
// and their combination.
type twoPBXs struct {
	a, b *Engine
	m    *Multi
}

func newTwoPBXs(now func() time.Time) *twoPBXs {
	cfg := testConfig(now)
	cfg.Opaque = testOpaquer{}
	a, b := New(cfg), New(cfg)
	a.SetLink(LinkLive)
	b.SetLink(LinkLive)
	a.Publish()
	b.Publish()
	return &twoPBXs{a: a, b: b, m: NewMulti(0, []string{"", "site2"}, []Source{a, b})}
}

// qualified are the keys whose values name an entity of the PBX: they
// must be qualified in site2's JSON, as must the keys of the maps under
// "conversations" and "members".
var qualified = map[string]bool{"exten": true, "owner": true, "queueId": true, "parkedBy": true,
	"member": true, "queue": true, "parking": true, "by": true}

// unqualify undoes what Multi does to site2's JSON: "site2:" prefixes on
// strings and keys, and "pbx":"site2". It reports an id that should have
// been qualified and was not.
func unqualify(t *testing.T, v any, parent string) any {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, x := range v {
			if k == "pbx" && x == "site2" {
				continue
			}
			if (parent == "conversations" || parent == "members") && !strings.HasPrefix(k, "site2:") && !strings.Contains(k, "~op") {
				t.Errorf("%s key %q not qualified", parent, k)
			}
			if s, ok := x.(string); ok && qualified[k] && s != "" && !strings.HasPrefix(s, "site2:") {
				t.Errorf("%s %q not qualified", k, s)
			}
			out[strings.TrimPrefix(k, "site2:")] = unqualify(t, x, k)
		}
		return out
	case string:
		return strings.TrimPrefix(v, "site2:")
	}
	return v
}

func decodeJSON(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%v in %s", err, b)
	}
	return v
}

// checkCombined holds the combined snapshot against both engines': the
// default PBX's bytes unchanged, site2's the same state qualified.
func (p *twoPBXs) checkCombined(t *testing.T, label string) {
	t.Helper()
	s, a := p.m.Snapshot(), p.a.Snapshot()
	if got, want := s.Extensions.Len(), 2*a.Extensions.Len(); got != want {
		t.Fatalf("%s: %d extensions combined, want %d", label, got, want)
	}
	type pair struct {
		one func(*Snapshot, string) []byte
		all func(*Snapshot) []byte
		as  func(*Snapshot, string, Class) []byte
	}
	hidConf := func(s *Snapshot, k string, _ Class) []byte {
		return s.ConferenceJSONFor(k, func(string) bool { return false })
	}
	for name, f := range map[string]pair{
		"extensions":  {(*Snapshot).ExtensionJSON, (*Snapshot).ExtensionsJSON, (*Snapshot).ExtensionJSONAs},
		"queues":      {(*Snapshot).QueueJSON, (*Snapshot).QueuesJSON, (*Snapshot).QueueJSONAs},
		"parkings":    {(*Snapshot).ParkingJSON, (*Snapshot).ParkingsJSON, (*Snapshot).ParkingJSONAs},
		"trunks":      {(*Snapshot).TrunkJSON, (*Snapshot).TrunksJSON, (*Snapshot).TrunkJSONAs},
		"conferences": {(*Snapshot).ConferenceJSON, (*Snapshot).ConferencesJSON, hidConf},
	} {
		all := decodeJSON(t, f.all(a)).(map[string]any)
		comb := decodeJSON(t, f.all(s)).(map[string]any)
		if len(comb) != 2*len(all) {
			t.Fatalf("%s: %s: %d combined, want %d", label, name, len(comb), 2*len(all))
		}
		for k := range all {
			if got, want := f.one(s, k), f.one(a, k); !bytes.Equal(got, want) {
				t.Fatalf("%s: %s %s: default PBX's bytes changed:\n got %s\nwant %s", label, name, k, got, want)
			}
			q := f.one(s, "site2:"+k)
			if !bytes.Contains(q, []byte(`"pbx":"site2"`)) {
				t.Fatalf("%s: %s site2:%s has no pbx: %s", label, name, k, q)
			}
			if got, want := unqualify(t, decodeJSON(t, q), name), decodeJSON(t, f.one(a, k)); !reflect.DeepEqual(got, want) {
				t.Fatalf("%s: %s site2:%s is not site2's %s qualified:\n got %s\nwant %s", label, name, k, k, q, f.one(a, k))
			}
			p.checkHidden(t, label+": "+name+" "+k, f.as(s, k, NumbersHidden), f.as(a, k, NumbersHidden), f.as(s, "site2:"+k, NumbersHidden), name != "conferences")
		}
	}
}

// opaqueRE matches testOpaquer's names: the length they carry differs
// between a bare and a qualified channel name.
var opaqueRE = regexp.MustCompile(`~op-[0-9]+`)

// checkHidden holds an entity's NumbersHidden bytes in the combined
// snapshot against the engine's: the default PBX's the engine's own (the
// same bytes, not a copy, when shared is true), site2's the engine's
// hidden bytes qualified, with "pbx" and opaque conversation ids and
// channels (never a number the engine's hidden class blanks).
func (p *twoPBXs) checkHidden(t *testing.T, label string, def, eng, site2 []byte, shared bool) {
	t.Helper()
	if !bytes.Equal(def, eng) {
		t.Fatalf("%s: default PBX's hidden bytes changed:\n got %s\nwant %s", label, def, eng)
	}
	if shared && len(def) > 0 && &def[0] != &eng[0] {
		t.Fatalf("%s: default PBX's hidden bytes made again, not the engine's", label)
	}
	if !bytes.Contains(site2, []byte(`"pbx":"site2"`)) {
		t.Fatalf("%s: site2's hidden bytes have no pbx: %s", label, site2)
	}
	mask := func(b []byte) []byte { return opaqueRE.ReplaceAll(b, []byte("~op")) }
	// A conversation id with no caller channel (">PJSIP/202-…") is
	// qualified "site2:>PJSIP/202-…": its caller side is "site2:", whose
	// opaque name testOpaquer writes ~op-6 (auth.OpaqueConvID of the
	// combined id, as rest resolves it).
	site2 = bytes.ReplaceAll(site2, []byte(`"~op-6>`), []byte(`">`))
	if got, want := unqualify(t, decodeJSON(t, mask(site2)), ""), decodeJSON(t, mask(eng)); !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: site2's hidden bytes are not the engine's qualified:\n got %s\nwant %s", label, site2, eng)
	}
}

type change struct{ typ, key string }

func changeSet(cs []Change, keep func(Change) bool) []change {
	var out []change
	for _, c := range cs {
		if keep(c) {
			out = append(out, change{c.Type.String(), c.Key})
		}
	}
	slices.SortFunc(out, func(x, y change) int { return strings.Compare(x.typ+" "+x.key, y.typ+" "+y.key) })
	return slices.Compact(out)
}

// TestMultiMatchesEngines replays every recording into two engines (the
// default PBX and site2) and checks after each message that the combined
// snapshot holds both, the default's JSON byte for byte and site2's
// qualified, and that the combined feed announces the same entities.
func TestMultiMatchesEngines(t *testing.T) {
	for _, name := range scenarios {
		t.Run(name, func(t *testing.T) {
			rec := loadRecording(t, name)
			var sc StreamClock
			p := newTwoPBXs(sc.Now)
			seqA, seqM := p.a.Feed().LastSeq(), p.m.Feed().LastSeq()
			queues := collOf(t, p.m.Snapshot().QueuesJSON()) // followed by the combined feed's queueMembers
			for i, m := range rec.msgs {
				sc.Observe(m)
				p.a.Apply(m)
				p.b.Apply(m)
				p.a.Publish()
				p.b.Publish()
				p.m.Sync(0)
				p.m.Sync(1)
				p.checkCombined(t, fmt.Sprintf("after #%d", i))
				ca, _ := p.a.Feed().Since(seqA)
				cm, ok := p.m.Feed().Since(seqM)
				if !ok {
					t.Fatal("combined feed lost changes")
				}
				seqA, seqM = p.a.Feed().LastSeq(), p.m.Feed().LastSeq()
				for _, c := range cm {
					if c.Type == QueueMembers {
						applyQueueDelta(t, queues, c.Data)
					}
				}
				if want := collOf(t, p.m.Snapshot().QueuesJSON()); !reflect.DeepEqual(queues, want) {
					t.Fatalf("after #%d: the queues the combined changes give\n%v\nthe snapshot's\n%v", i, queues, want)
				}
				want := changeSet(ca, func(Change) bool { return true })
				if got := changeSet(cm, func(c Change) bool { return !strings.HasPrefix(c.Key, "site2:") }); !reflect.DeepEqual(got, want) {
					t.Fatalf("after #%d: default PBX's changes %v, want %v", i, got, want)
				}
				for j := range want {
					want[j].key = QualifyID("site2", want[j].key)
					if want[j].typ == "queueMemberUpdate" {
						q, mb, _ := strings.Cut(strings.TrimPrefix(want[j].key, "site2:"), "/")
						want[j].key = "site2:" + q + "/site2:" + mb
					}
				}
				want = slices.DeleteFunc(want, func(c change) bool { return c.typ == "pbxStatus" })
				if got := changeSet(cm, func(c Change) bool { return strings.HasPrefix(c.Key, "site2:") }); !reflect.DeepEqual(got, want) {
					t.Fatalf("after #%d: site2's changes %v, want %v", i, got, want)
				}
				// site2's trunk and queue changes say what changed, as the
				// engine's: as many conversations or members set and
				// removed as the default's.
				sizes := map[change]string{}
				for _, c := range cm {
					if c.Type == TrunkConversations || c.Type == QueueMembers {
						var d struct {
							Set     map[string]any
							Removed []string
						}
						json.Unmarshal(c.Data, &d)
						sizes[change{c.Type.String(), c.Key}] = fmt.Sprint(len(d.Set), len(d.Removed))
					}
				}
				for k, n := range sizes {
					q := change{k.typ, "site2:" + k.key}
					if !strings.HasPrefix(k.key, "site2:") && sizes[q] != n {
						t.Fatalf("after #%d: %s %s sets and removes %s, site2's %s", i, k.typ, k.key, n, sizes[q])
					}
				}
				for _, c := range cm {
					if c.Type != PBXStatus && strings.HasPrefix(c.Key, "site2:") && !bytes.Contains(c.Data, []byte(`"pbx":"site2"`)) && c.Type != QueueMemberUpdate {
						t.Fatalf("after #%d: %s %s has no pbx: %s", i, c.Type, c.Key, c.Data)
					}
					// A change still current leads to the snapshot's hidden bytes.
					if s := p.m.Snapshot(); c.Type == ExtenUpdate && bytes.Equal(c.Data, s.ExtensionJSON(c.Key)) {
						if got, want := c.JSON(NumbersHidden), s.ExtensionJSONAs(c.Key, NumbersHidden); !bytes.Equal(got, want) {
							t.Fatalf("after #%d: %s's hidden change %s, the snapshot's %s", i, c.Key, got, want)
						}
					}
				}
			}
		})
	}
}

// TestMultiLinkPerPBX: one PBX's link going down makes the combined
// status say which, stale as a whole, the other PBX still live.
func TestMultiLinkPerPBX(t *testing.T) {
	now := time.Unix(1796028439, 0)
	p := newTwoPBXs(func() time.Time { return now })
	if s := p.m.Snapshot(); s.Stale || s.Link != LinkLive {
		t.Fatalf("both live: combined %v stale=%v", s.Link, s.Stale)
	}
	seq := p.m.Feed().LastSeq()
	p.b.SetLink(LinkDown)
	p.b.Publish()
	s := p.m.Sync(1)
	if !s.Stale || s.Link != LinkDown {
		t.Fatalf("site2 down: combined %v stale=%v", s.Link, s.Stale)
	}
	want := []PBXState{{Name: "", Link: LinkLive, Since: s.PBXs[0].Since}, {Name: "site2", Link: LinkDown, Stale: true, Since: s.PBXs[1].Since}}
	if !reflect.DeepEqual(s.PBXs, want) {
		t.Fatalf("PBXs = %+v, want %+v", s.PBXs, want)
	}
	st := string(s.StatusJSON())
	if !strings.Contains(st, `"pbxs":{"default":{"pbx":"live","stale":false,`) || !strings.Contains(st, `"site2":{"pbx":"down","stale":true,`) {
		t.Fatalf("status %s", st)
	}
	cs, _ := p.m.Feed().Since(seq)
	if len(cs) != 1 || cs[0].Type != PBXStatus || !bytes.Equal(cs[0].Data, s.StatusJSON()) {
		t.Fatalf("feed after site2 went down: %+v", cs)
	}
	// A reader of the default PBX only: its link, live, not stale; of
	// site2: down; the change is news to site2's readers only.
	def, site2 := func(n string) bool { return n == "" }, func(n string) bool { return n == "site2" }
	if got, want := string(s.StatusFor(def)), `{"pbx":"live","version":`; !strings.HasPrefix(got, want) || strings.Contains(got, "site2") || !strings.Contains(got, `"pbxs":{"default":{"pbx":"live","stale":false,`) {
		t.Errorf("status for the default PBX's reader %s", got)
	}
	if got := string(s.StatusFor(site2)); !strings.HasPrefix(got, `{"pbx":"down",`) || strings.Contains(got, "default") {
		t.Errorf("status for site2's reader %s", got)
	}
	if s.StaleFor(def) || !s.StaleFor(site2) || s.PBXStale("") || !s.PBXStale("site2") || !s.PBXStale("site9") {
		t.Errorf("stale: default %v, site2 %v", s.StaleFor(def), s.StaleFor(site2))
	}
	if b, news := cs[0].StatusFor(def); news || b != nil {
		t.Errorf("site2's change is news to the default PBX's reader: %s", b)
	}
	if b, news := cs[0].StatusFor(site2); !news || !bytes.Equal(b, s.StatusFor(site2)) {
		t.Errorf("site2's change to site2's reader: %v %s", news, b)
	}
	if s2 := p.m.Sync(1); s2 != s {
		t.Fatal("a Sync with nothing new made a new snapshot")
	}
}

func TestSplitID(t *testing.T) {
	known := func(n string) bool { return n == "site2" }
	for _, c := range []struct{ id, pbx, local string }{
		{"201", "", "201"},
		{"site2:201", "site2", "201"},
		{"site3:201", "", "site3:201"},
		{":201", "", ":201"},
		{"site2:PJSIP/201-1>PJSIP/202-2", "site2", "PJSIP/201-1>PJSIP/202-2"},
	} {
		if p, l := SplitID(c.id, known); p != c.pbx || l != c.local {
			t.Errorf("SplitID(%q) = %q, %q; want %q, %q", c.id, p, l, c.pbx, c.local)
		}
	}
	for _, bad := range []string{"", "default", "Site", "2site", "a:b", "a/b", strings.Repeat("a", 33)} {
		if CheckPBXName(bad) == nil {
			t.Errorf("CheckPBXName(%q) accepted", bad)
		}
	}
	for _, good := range []string{"site2", "rome", "a-b_c"} {
		if err := CheckPBXName(good); err != nil {
			t.Errorf("CheckPBXName(%q): %v", good, err)
		}
	}
}

// TestMultiFeedAheadOfSnapshot: an engine appends to its feed just before
// it stores the snapshot; a Sync in between must leave those changes to
// the next Sync, not send them twice.
func TestMultiFeedAheadOfSnapshot(t *testing.T) {
	now := time.Unix(1796028439, 0)
	p := newTwoPBXs(func() time.Time { return now })
	seq := p.m.Feed().LastSeq()
	p.b.SetLink(LinkDown)
	p.b.Publish()
	ring := Ringing{Exten: "201", CallerNum: "202", Convid: "PJSIP/202-1>PJSIP/201-2"}
	p.b.feed.append([]Change{valueChange(ExtenRinging, "201", ring, now.UnixMilli(), "", appendRinging)})
	p.m.Sync(1) // sees the down snapshot; the ringing is past it
	p.b.SetLink(LinkLive)
	p.b.Publish()
	p.m.Sync(1)
	cs, _ := p.m.Feed().Since(seq)
	n := 0
	for _, c := range cs {
		if c.Type == ExtenRinging {
			n++
			if c.Key != "site2:201" || !strings.Contains(string(c.Data), `"convid":"site2:PJSIP/202-1>PJSIP/201-2"`) || !strings.HasSuffix(string(c.Data), `,"pbx":"site2"}`) {
				t.Errorf("ringing %s %s", c.Key, c.Data)
			}
		}
	}
	if n != 1 {
		t.Fatalf("%d extenRinging in the combined feed, want 1: %+v", n, cs)
	}
}

// TestMultiPresenceCellphones: the combined presence reads each PBX's
// cellphones (Config.Cellphones, by its own ids) for its extensions: a
// forward to site2:201's user's cellphone is "cellphone" there, as in
// site2's engine, while the same forward on the default PBX's 201 (whose
// user has another cellphone) is "callforward".
func TestMultiPresenceCellphones(t *testing.T) {
	cf := func(e *Engine, to string) {
		e.Apply(ami.NewMessage(ami.Header{Key: "Event", Value: "DBGetResponse"}, ami.Header{Key: "Family", Value: "CF"},
			ami.Header{Key: "Key", Value: "201"}, ami.Header{Key: "Val", Value: to}))
		e.Publish()
	}
	a := New(Config{Names: map[string]string{"201": "Ada"}, Cellphones: map[string]string{"201": "3330000001"}})
	b := New(Config{Names: map[string]string{"201": "Sam"}, Cellphones: map[string]string{"201": "3331234567"}})
	cf(a, "3331234567")
	cf(b, "3331234567")
	m := NewMulti(0, []string{"", "site2"}, []Source{a, b})
	s := m.Snapshot()
	if got, want := string(s.PresenceJSON()), `{"201":"callforward","site2:201":"cellphone"}`; got != want {
		t.Errorf("presence %s, want %s", got, want)
	}
	// A reader of one PBX: its extensions only, each with its user's cellphone.
	for pbx, want := range map[string]string{"": `{"201":"callforward"}`, "site2": `{"site2:201":"cellphone"}`} {
		keep := func(k string) bool { p, _ := SplitID(k, func(n string) bool { return n == "site2" }); return p == pbx }
		if got := string(s.PresenceJSONWhere(keep)); got != want {
			t.Errorf("presence of PBX %q %s, want %s", pbx, got, want)
		}
	}
}
