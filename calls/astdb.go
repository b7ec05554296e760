package calls

import (
	"errors"
	"strings"
	"unicode/utf8"

	"github.com/ctibridge/ctibridge/ami"
)

// Call forwarding, DND and names as FreePBX keeps them in Asterisk's
// database (AstDB): CF/<ext>, CFB/<ext> and CFU/<ext> hold the forward
// targets (unconditional, busy, unavailable), DND/<ext> is "YES" while
// do-not-disturb is on, AMPUSER/<ext>/cidname is the extension's name.
// AstDB changes raise no AMI event, so these are read at every resync
// (DBGetTree per family, or DBGet per extension on a PBX without
// DBGetTree), on a period (FollowRefresh) and after ctibridge's own
// cfcall/dnd actions (ForwardRefresh).

// The AstDB families read.
const (
	famCF      = "CF"
	famCFB     = "CFB"
	famCFU     = "CFU"
	famDND     = "DND"
	famAMPUSER = "AMPUSER"
	famDEVICE  = "DEVICE" // DEVICE/<device>/user: whose device it is (devices.go)
)

// stateFamilies change at any time (feature codes on the phones).
var stateFamilies = [...]string{famCF, famCFB, famCFU, famDND}

// maxNameLen bounds a name read from AstDB.
const maxNameLen = 128

// ForwardRefresh is the follow-ups that re-read one extension's forwards
// and DND: what to send after changing them.
func ForwardRefresh(exten string) []ami.Message {
	out := make([]ami.Message, 0, len(stateFamilies))
	for _, f := range stateFamilies {
		out = append(out, ami.NewAction(ami.ActionDBGet, "Family", f, "Key", exten))
	}
	return out
}

func astdbResyncFollowups(e *Engine) []ami.Message {
	return append(astdbStateFollowups(e), astdbNameFollowups(e)...)
}

func astdbRefreshFollowups(e *Engine) []ami.Message {
	out := astdbStateFollowups(e)
	if e.namesDue() {
		out = append(out, astdbNameFollowups(e)...)
	}
	return out
}

// astdbNameFollowups read FreePBX's names (AMPUSER/<ext>/cidname).
func astdbNameFollowups(e *Engine) []ami.Message {
	var out []ami.Message
	if e.missing(ami.ActionDBGetTree) {
		for _, k := range sortedKeys(e.exts) {
			out = append(out, ami.NewAction(ami.ActionDBGet, "Family", famAMPUSER, "Key", k+"/cidname"))
		}
		return out
	}
	return append(out, ami.NewAction(ami.ActionDBGetTree, "Family", famAMPUSER), ami.NewAction(ami.ActionDBGetTree, "Family", famDEVICE))
}

// astdbStateFollowups read the forwards and DND.
func astdbStateFollowups(e *Engine) []ami.Message {
	var out []ami.Message
	if !e.missing(ami.ActionDBGetTree) {
		for _, f := range stateFamilies {
			out = append(out, ami.NewAction(ami.ActionDBGetTree, "Family", f))
		}
	} else {
		for _, k := range sortedKeys(e.exts) {
			out = append(out, ForwardRefresh(k)...)
		}
	}
	return out
}

// onDBGetResponse applies a DBGetResponse item: one key's value.
func (e *Engine) onDBGetResponse(m ami.Message) {
	e.setDB(m.Get("Family"), m.Get("Key"), m.Get("Val"), true)
}

// onDBGetTreeResponse applies a DBGetTreeResponse item, whose Key is the
// full path "/CF/201".
func (e *Engine) onDBGetTreeResponse(m ami.Message) {
	fam, key, ok := strings.Cut(strings.TrimPrefix(m.Get("Key"), "/"), "/")
	if !ok {
		return
	}
	e.setDB(fam, key, m.Get("Val"), false)
}

// onDBGetAnswer: a DBGet the PBX answered "not found" means the key is
// absent (the forward is off); found values came as DBGetResponse items.
func onDBGetAnswer(e *Engine, action ami.Message, _ ami.Response, err error) {
	if notFound(err) {
		e.setDB(action.Get("Family"), action.Get("Key"), "", false)
	}
}

// onDBGetTreeAnswer: the answer lists the whole family, so an extension it
// does not list has no value there. A PBX without DBGetTree is asked key
// by key.
func onDBGetTreeAnswer(e *Engine, action ami.Message, resp ami.Response, err error) {
	fam := action.Get("Family")
	if fam == famDEVICE && e.missing(ami.ActionDBGetTree) {
		return // devices are read by tree only (Config.Devices names the others)
	}
	if e.missing(ami.ActionDBGetTree) {
		for _, k := range sortedKeys(e.exts) {
			key := k
			if fam == famAMPUSER {
				key += "/cidname"
			}
			e.ask(ami.NewAction(ami.ActionDBGet, "Family", fam, "Key", key))
		}
		return
	}
	if err != nil && !notFound(err) {
		return
	}
	listed := map[string]bool{}
	for _, it := range resp.Items {
		if f, key, ok := strings.Cut(strings.TrimPrefix(it.Get("Key"), "/"), "/"); ok && f == fam {
			listed[key] = true
		}
	}
	if fam == famDEVICE {
		// A device the tree no longer lists is no one's device (unless
		// the Config says whose it is).
		for _, dev := range sortedKeys(e.devUser) {
			if !listed[dev+"/user"] && e.cfg.Devices[dev] == "" {
				e.setDevice(dev, "")
			}
		}
		return
	}
	for k := range e.exts {
		key := k
		if fam == famAMPUSER {
			key += "/cidname"
		}
		if !listed[key] {
			e.setDB(fam, key, "", false)
		}
	}
}

func notFound(err error) bool {
	var ae *ami.ActionError
	return errors.As(err, &ae) && strings.Contains(strings.ToLower(ae.Message), "not found")
}

// setDB applies one AstDB value ("" = absent). create says whether an
// unknown extension may be created (a DBGet names it on purpose; a tree
// may hold keys of extensions long deleted).
func (e *Engine) setDB(fam, key, val string, create bool) {
	if fam == famDEVICE {
		if dev, field, ok := strings.Cut(key, "/"); ok && field == "user" {
			e.setDevice(dev, val)
		}
		return
	}
	ext := key
	if fam == famAMPUSER {
		var field string
		var ok bool
		if ext, field, ok = strings.Cut(key, "/"); !ok || field != "cidname" {
			return
		}
	}
	x := e.exts[ext]
	if x == nil && create && val != "" {
		x = e.extFor(ext)
	}
	if x == nil {
		return
	}
	switch fam {
	case famCF, famCFB, famCFU:
		if val != "" && !validTarget(val) {
			e.stats.BadValues++ // a target with letters or CR/LF never becomes state nor an AMI header
			return
		}
		p := &x.cf
		if fam == famCFB {
			p = &x.cfb
		} else if fam == famCFU {
			p = &x.cfu
		}
		if *p != val {
			*p = strings.Clone(val)
			e.dirtyExt[x.exten] = struct{}{}
		}
	case famDND:
		if e.follow.answering && x.dndAt > e.follow.mark {
			return // *76 toggled it (Custom:DND, live) since this read was sent
		}
		on := strings.EqualFold(val, "YES")
		if val != "" && !on {
			e.stats.BadValues++
			return
		}
		if x.dnd != on {
			x.dnd = on
			e.dirtyExt[x.exten] = struct{}{}
		}
	case famAMPUSER:
		if !validName(val) {
			e.stats.BadValues++
			return
		}
		if x.astName != val {
			before := x.displayName()
			x.astName = strings.Clone(val)
			e.renamed(x, before)
			e.dirtyExt[x.exten] = struct{}{}
		}
	}
}

// validTarget: what a phone can dial, as the REST dial pattern's default
// (digits, *, # and +, at most 32), or one of FreePBX's voicemail
// extensions vmu/vmb/vms/vmi<digits>. Any other letter is refused.
func validTarget(s string) bool {
	if len(s) == 0 || len(s) > 32 {
		return false
	}
	if vmPrefix(s) {
		return len(s) > 3 && allDigits(s[3:])
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && c != '*' && c != '#' && c != '+' {
			return false
		}
	}
	return true
}

// validName: printable UTF-8, at most maxNameLen bytes ("" clears).
func validName(s string) bool {
	if len(s) > maxNameLen || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

// vmPrefix reports whether s starts with one of FreePBX's voicemail
// extension prefixes: vmu (unavailable greeting), vmb (busy), vms (no
// greeting), vmi (instructions only).
func vmPrefix(s string) bool {
	return len(s) >= 3 && s[0] == 'v' && s[1] == 'm' && (s[2] == 'u' || s[2] == 'b' || s[2] == 's' || s[2] == 'i')
}
