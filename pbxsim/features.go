package pbxsim

import (
	"context"
	"slices"
	"strings"
	"sync"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/ami/amievent"
)

// features are the PBX services behind AMI actions that touch no call
// flow: AstDB (where FreePBX keeps DND and call forwarding), custom device
// states (FreePBX's Custom:DND<ext>), and call recording. They let every
// action of the bridge's REST API work against the simulator.
type features struct {
	mu     sync.Mutex
	db     map[string]string // "family/key" -> value
	custom map[string]string // "Custom:DND201" -> device state
}

func (p *PBX) registerFeatures() {
	p.feat.db = map[string]string{}
	p.feat.custom = map[string]string{}
	s := p.amiSrv
	s.Handle(ami.ActionDBPut, p.actDBPut)
	s.Handle(ami.ActionDBGet, p.actDBGet)
	s.Handle(ami.ActionDBDel, p.actDBDel)
	s.Handle(ami.ActionDBGetTree, p.actDBGetTree)
	s.Handle(ami.ActionSetvar, p.actSetvar)
	s.Handle(ami.ActionMixMonitor, p.actMixMonitor(ami.EventMixMonitorStart))
	s.Handle(ami.ActionStopMixMonitor, p.actMixMonitor(ami.EventMixMonitorStop))
	s.Handle(ami.ActionMixMonitorMute, p.actMixMonitor(ami.EventMixMonitorMute))
}

// dbKey reads an AstDB action's Family and Key. When one is missing, it
// returns the error Asterisk 22's main/db.c answers (DBPut says it without
// the full stop DBGet and DBDel end with).
func dbKey(req ami.Message, stop string) (string, []ami.Message) {
	f, k := req.Get("Family"), req.Get("Key")
	switch {
	case f == "":
		return "", errResp("No family specified" + stop)
	case k == "":
		return "", errResp("No key specified" + stop)
	}
	return f + "/" + k, nil
}

func (p *PBX) actDBPut(_ context.Context, _ *ami.Session, req ami.Message) []ami.Message {
	k, refused := dbKey(req, "")
	if refused != nil {
		return refused
	}
	p.feat.mu.Lock()
	p.feat.db[k] = req.Get("Val")
	p.feat.mu.Unlock()
	return []ami.Message{resp("Success", "Message", "Updated database successfully")}
}

func (p *PBX) actDBGet(_ context.Context, _ *ami.Session, req ami.Message) []ami.Message {
	k, refused := dbKey(req, ".")
	if refused != nil {
		return refused
	}
	p.feat.mu.Lock()
	v, found := p.feat.db[k]
	p.feat.mu.Unlock()
	if !found {
		return errResp("Database entry not found")
	}
	return list(req, "Result will follow", ami.EventDBGetComplete,
		[]ami.Message{item(ami.EventDBGetResponse, "Family", req.Get("Family"), "Key", req.Get("Key"), "Val", v)})
}

// actDBGetTree lists the keys under Family (and Key, when given), or
// the whole AstDB, in key order, each as its full path "/CF/201" as
// Asterisk's main/db.c does; an empty tree is an empty list, not an error.
func (p *PBX) actDBGetTree(_ context.Context, _ *ami.Session, req ami.Message) []ami.Message {
	prefix := ""
	if f := req.Get("Family"); f != "" {
		prefix = f + "/"
		if k := req.Get("Key"); k != "" {
			prefix += k
		}
	}
	p.feat.mu.Lock()
	keys := make([]string, 0, len(p.feat.db))
	for k := range p.feat.db {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	items := make([]ami.Message, 0, len(keys))
	for _, k := range keys {
		items = append(items, item(ami.EventDBGetTreeResponse, "Key", "/"+k, "Val", p.feat.db[k]))
	}
	p.feat.mu.Unlock()
	return list(req, "Result will follow", ami.EventDBGetTreeComplete, items)
}

// actDBDel deletes a key. A key that is not there is refused as Asterisk
// 22 refuses it (ast_db_del2 fails, and the answer does not say why).
func (p *PBX) actDBDel(_ context.Context, _ *ami.Session, req ami.Message) []ami.Message {
	k, refused := dbKey(req, ".")
	if refused != nil {
		return refused
	}
	p.feat.mu.Lock()
	_, found := p.feat.db[k]
	delete(p.feat.db, k)
	p.feat.mu.Unlock()
	if !found {
		return errResp("Database entry could not be deleted")
	}
	return []ami.Message{resp("Success", "Message", "Key deleted successfully")}
}

// actSetvar sets a variable; DEVICE_STATE(Custom:...) changes a custom
// device state, which Asterisk reports as DeviceStateChange.
func (p *PBX) actSetvar(_ context.Context, _ *ami.Session, req ami.Message) []ami.Message {
	name := req.Get("Variable")
	if name == "" {
		return errResp("No variable specified")
	}
	if ch := req.Get("Channel"); ch != "" {
		p.mu.Lock()
		ok := p.channelByName(ch) != nil
		p.mu.Unlock()
		if !ok {
			return errResp("No such channel")
		}
		return []ami.Message{resp("Success", "Message", "Variable Set")}
	}
	if dev, ok := strings.CutPrefix(name, "DEVICE_STATE("); ok && strings.HasSuffix(dev, ")") {
		dev = strings.TrimSuffix(dev, ")")
		if !strings.HasPrefix(strings.ToLower(dev), "custom:") {
			return errResp("Failed to set variable")
		}
		state := strings.ToUpper(req.Get("Value"))
		p.feat.mu.Lock()
		p.feat.custom[dev] = state
		p.feat.mu.Unlock()
		if ext, ok := dndHint(dev); ok {
			// FreePBX's *76<ext> hint follows its DND device (call_forward_astdb).
			st, txt := customExtStatus(state)
			p.emit(ami.NewMessage(append(amievent.Head(ami.EventExtensionStatus, "call,all", 7),
				ami.Header{Key: "Exten", Value: "*76" + ext}, ami.Header{Key: "Context", Value: p.cfg.Context},
				ami.Header{Key: "Hint", Value: dev}, ami.Header{Key: "Status", Value: st}, ami.Header{Key: "StatusText", Value: txt})...))
		}
		p.emit(ami.NewMessage(append(amievent.Head(ami.EventDeviceStateChange, "call,all", 4),
			ami.Header{Key: "Device", Value: dev}, ami.Header{Key: "State", Value: state})...))
	}
	return []ami.Message{resp("Success", "Message", "Variable Set")}
}

// customStates lists the custom device states set so far, for
// DeviceStateList.
func (p *PBX) customStates() []ami.Message {
	p.feat.mu.Lock()
	defer p.feat.mu.Unlock()
	var items []ami.Message
	for dev, st := range p.feat.custom {
		items = append(items, item(ami.EventDeviceStateChange, "Device", dev, "State", st))
	}
	return items
}

// actMixMonitor answers MixMonitor, StopMixMonitor and MixMonitorMute on a
// live channel with the event Asterisk emits.
func (p *PBX) actMixMonitor(event string) ami.HandlerFunc {
	return func(_ context.Context, _ *ami.Session, req ami.Message) []ami.Message {
		p.mu.Lock()
		ch := p.channelByName(req.Get("Channel"))
		if ch == nil {
			p.mu.Unlock()
			return errResp("No such channel")
		}
		hs := chanHeaders(amievent.Head(event, "call,all", 24), "", ch)
		p.mu.Unlock()
		if event == ami.EventMixMonitorMute {
			state := "0"
			if v := req.Get("State"); v == "1" || strings.EqualFold(v, "true") {
				state = "1"
			}
			hs = append(hs, ami.Header{Key: "Direction", Value: req.Get("Direction")}, ami.Header{Key: "State", Value: state})
		}
		p.emit(ami.NewMessage(hs...))
		return []ami.Message{resp("Success")}
	}
}

// dndHint reports whether dev is FreePBX's DND device of an extension
// (Custom:DND<ext>).
func dndHint(dev string) (ext string, ok bool) {
	if len(dev) > len("Custom:DND") && strings.EqualFold(dev[:len("Custom:DND")], "Custom:DND") {
		return dev[len("Custom:DND"):], true
	}
	return "", false
}

// customExtStatus is the extension state of a hint on a custom device.
func customExtStatus(state string) (status, text string) {
	switch state {
	case "NOT_INUSE":
		return "0", "Idle"
	case "INUSE":
		return "1", "InUse"
	case "BUSY":
		return "2", "Busy"
	case "UNAVAILABLE":
		return "4", "Unavailable"
	case "RINGING":
		return "8", "Ringing"
	case "ONHOLD":
		return "16", "Hold"
	}
	return "-1", "Unknown"
}
