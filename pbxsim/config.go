package pbxsim

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/ctibridge/ctibridge/ami"
)

// Defaults of Config.
const (
	DefaultSIPAddr         = "127.0.0.1:5060"
	DefaultAMIAddr         = "127.0.0.1:5038"
	DefaultAMIUser         = "ctibridge"
	DefaultAMISecret       = "ctibridge"
	DefaultExtensions      = "200-299"
	DefaultAutoAnswer      = "600-699"
	DefaultRingTimeout     = 15 * time.Second
	DefaultMaxCallDuration = time.Hour
	DefaultParkingTimeout  = 45 * time.Second
	DefaultRegisterExpiry  = 3600 * time.Second
	DefaultMinExpiry       = 60 * time.Second
	DefaultMaxExpiry       = 7200 * time.Second
	DefaultContext         = "from-internal"
	DefaultTrunk           = "trunk"
	DefaultQueue           = "support"
	DefaultQueueNumber     = "600"
	DefaultQueueStrategy   = "ringall"
	DefaultQueueTimeout    = 60 * time.Second
	DefaultQueueRingTime   = 20 * time.Second
	DefaultQueueRetry      = 2 * time.Second
)

// defaultNames are the names of the phones in the recordings of real
// Asterisk (201-204 are the caller IDs in ami/testdata/*.ami; the others
// go on alphabetically), so that a scenario run through pbxsim reports
// the same caller IDs.
var defaultNames = map[string]string{
	"201": "Alice", "202": "Bob", "203": "Carol", "204": "Dave",
	"205": "Erin", "206": "Frank", "207": "Grace", "208": "Heidi",
}

// Extension is one phone the simulator knows.
type Extension struct {
	Number string // "201": the SIP user name, the PJSIP endpoint and the dialplan extension
	Name   string // caller ID name ("Alice"); default "Ext <number>"
}

// Config configures a PBX. The zero value of every field means its default.
type Config struct {
	// SIPAddr is where SIP is served, UDP and TCP on the same port.
	// Default 127.0.0.1:5060; port 0 picks a free port (the same for both).
	SIPAddr string
	// AMIAddr is where the manager interface listens. Default
	// 127.0.0.1:5038; port 0 picks a free port.
	AMIAddr string
	// AMIUsers maps manager user names to secrets. Default
	// {"ctibridge": "ctibridge"}.
	AMIUsers map[string]string
	// AMITrace, when set, is called with every frame a manager session
	// receives, before it is handled (tests log every action the PBX
	// got with it).
	AMITrace func(s *ami.Session, m ami.Message)
	// Extensions are the phones. Default 200-299, 201-208 named as in the
	// recordings (Alice, Bob, Carol, Dave, ...), the others "Ext <n>".
	Extensions []Extension
	// AutoAnswer lists numbers the simulator answers itself (Answer, then
	// wait until the caller hangs up). Default 600-699. Calls to a known
	// extension that has no registered contact are answered the same way.
	AutoAnswer []string
	// SIPSecret, when set, is the digest password of every extension:
	// REGISTER must authenticate (user name = extension number). Default
	// "": no authentication.
	SIPSecret string
	// Realm is the digest realm. Default "asterisk".
	Realm string
	// Context is the dialplan context of the extensions. Default "from-internal".
	Context string
	// Trunk is the name of the trunk endpoint; an INVITE whose From user is
	// not a known extension arrives on it ("PJSIP/trunk-0000000a",
	// context from-trunk). Default "trunk".
	Trunk string
	// Queue is the name of the queue reported by QueueStatus, with
	// QueueMembers as static members. Default "support" with 203 and 204.
	Queue        string
	QueueMembers []string
	// QueueNumber is the extension that runs Answer() then
	// Queue(<Queue>,tT,,,<QueueTimeout>). Default 600.
	QueueNumber string
	// QueueStrategy is "ringall" (every free member rings) or "rrmemory"
	// (one member at a time, round robin remembering the last one).
	// Default ringall.
	QueueStrategy string
	// QueueServiceLevel is the queue's service level (queues.conf
	// servicelevel): a call answered, or abandoned, within it counts
	// toward QueueStatus's ServicelevelPerf and ServicelevelPerf2. Default
	// 0, as the recorded PBX's.
	QueueServiceLevel time.Duration
	// QueueTimeout is how long a caller waits in the queue before leaving
	// it (Queue()'s timeout argument). Default 60 s.
	QueueTimeout time.Duration
	// QueueRingTime is how long a member rings (queues.conf timeout);
	// QueueRetry the pause before the members are tried again (retry).
	// Defaults 20 s and 2 s.
	QueueRingTime, QueueRetry time.Duration
	// RingTimeout is the Dial timeout: after it an unanswered callee is
	// cancelled (DialStatus NOANSWER). Default 15 s (RINGTIME in the
	// recordings' dialplan).
	RingTimeout time.Duration
	// MaxCallDuration hangs up calls that last longer (a phone that vanished
	// without BYE would otherwise keep its channel forever). Default 1 h.
	MaxCallDuration time.Duration
	// ParkingTimeout is how long a call stays parked (701-720) before it is
	// hung up. Default 45 s.
	ParkingTimeout time.Duration
	// DefaultExpiry, MinExpiry and MaxExpiry bound REGISTER expiry.
	// Defaults 3600 s, 60 s and 7200 s (Asterisk's aor defaults).
	DefaultExpiry, MinExpiry, MaxExpiry time.Duration
	// Plan is the dialplan: "default" (or "") the recordings' plain one,
	// "freepbx" FreePBX/NethVoice's topologies (plan_freepbx.go): a ring
	// group and a queue whose members ring through Local channels, users
	// with a second device, an outbound route. Default "default".
	Plan string
	// RingGroup is the freepbx plan's ring group (ringall through
	// Local/<member>@from-internal/n), RingGroupMembers its members.
	// Default 610 with 202, 203, 204.
	RingGroup        string
	RingGroupMembers []string
	// RingGroups are more ring groups of the freepbx plan, by number:
	// their members, rung as RingGroup's (their unanswered calls are
	// hung up). Default none.
	RingGroups map[string][]string
	// RingGroupOptimize dials the ring group's members without /n: the
	// answered member's Local pair optimises itself away (Asterisk's
	// default; FreePBX writes /n, as the recordings show). Default false.
	RingGroupOptimize bool
	// RingGroupVoicemail is the mailbox an unanswered ring group call
	// goes to (FreePBX's destination if no answer, a user's voicemail),
	// when it is one of Mailboxes; else the caller is hung up. Default
	// the first of RingGroupMembers.
	RingGroupVoicemail string
	// Devices maps a user's second device to the user (NethVoice's
	// 9X<exten> endpoints), in the freepbx plan: a call to the user rings
	// every registered device, a call from a device is the user's.
	// Default {"91201": "201"}.
	Devices map[string]string
	// DIDPrefix is the freepbx plan's DID block: a trunk call to
	// <prefix><n> goes to n, and an outbound call shows
	// <prefix><exten> as its caller ID. Default "0612340".
	DIDPrefix string
	// Mailboxes are the extensions with a voicemail box (default@<ext>):
	// their unanswered or busy calls go to voicemail. Default none.
	Mailboxes []string
	// Log receives lifecycle logs. Default: discard.
	Log *slog.Logger
	// Now is the clock of Uniqueids, CDR times and expiries. Default time.Now.
	Now func() time.Time
}

func (c *Config) setDefaults() error {
	if c.SIPAddr == "" {
		c.SIPAddr = DefaultSIPAddr
	}
	if c.AMIAddr == "" {
		c.AMIAddr = DefaultAMIAddr
	}
	if len(c.AMIUsers) == 0 {
		c.AMIUsers = map[string]string{DefaultAMIUser: DefaultAMISecret}
	}
	if len(c.Extensions) == 0 {
		exts, err := ExtensionRange(DefaultExtensions)
		if err != nil {
			return err
		}
		c.Extensions = exts
	}
	for i := range c.Extensions {
		if c.Extensions[i].Name == "" {
			c.Extensions[i].Name = "Ext " + c.Extensions[i].Number
		}
	}
	if c.AutoAnswer == nil {
		nums, err := ParseRange(DefaultAutoAnswer)
		if err != nil {
			return err
		}
		c.AutoAnswer = nums
	}
	if err := c.planDefaults(); err != nil {
		return err
	}
	if c.Realm == "" {
		c.Realm = "asterisk"
	}
	if c.Context == "" {
		c.Context = DefaultContext
	}
	if c.Trunk == "" {
		c.Trunk = DefaultTrunk
	}
	if c.Queue == "" {
		c.Queue = DefaultQueue
	}
	if c.QueueMembers == nil {
		c.QueueMembers = []string{"203", "204"}
	}
	if c.QueueNumber == "" {
		c.QueueNumber = DefaultQueueNumber
	}
	switch c.QueueStrategy {
	case "":
		c.QueueStrategy = DefaultQueueStrategy
	case "ringall", "rrmemory":
	default:
		return fmt.Errorf("pbxsim: queue strategy %q: want ringall or rrmemory", c.QueueStrategy)
	}
	if c.QueueTimeout <= 0 {
		c.QueueTimeout = DefaultQueueTimeout
	}
	if c.QueueRingTime <= 0 {
		c.QueueRingTime = DefaultQueueRingTime
	}
	if c.QueueRetry <= 0 {
		c.QueueRetry = DefaultQueueRetry
	}
	if c.RingTimeout <= 0 {
		c.RingTimeout = DefaultRingTimeout
	}
	if c.MaxCallDuration <= 0 {
		c.MaxCallDuration = DefaultMaxCallDuration
	}
	if c.ParkingTimeout <= 0 {
		c.ParkingTimeout = DefaultParkingTimeout
	}
	if c.DefaultExpiry <= 0 {
		c.DefaultExpiry = DefaultRegisterExpiry
	}
	if c.MinExpiry <= 0 {
		c.MinExpiry = DefaultMinExpiry
	}
	if c.MaxExpiry <= 0 {
		c.MaxExpiry = DefaultMaxExpiry
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return nil
}

// ParseRange expands "200-299" (or "201", or "201,205-207") into numbers.
// The bounds of a range must have the same number of digits.
func ParseRange(s string) ([]string, error) {
	var out []string
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		if !isRange {
			hi = lo
		}
		a, err1 := strconv.Atoi(lo)
		b, err2 := strconv.Atoi(hi)
		if err1 != nil || err2 != nil || a < 0 || b < a || len(lo) != len(hi) || b-a > 100000 {
			return nil, fmt.Errorf("pbxsim: bad number range %q", part)
		}
		for n := a; n <= b; n++ {
			out = append(out, fmt.Sprintf("%0*d", len(lo), n))
		}
	}
	return out, nil
}

// ExtensionRange is ParseRange giving Extensions, named as in the
// recordings where known.
func ExtensionRange(s string) ([]Extension, error) {
	nums, err := ParseRange(s)
	if err != nil {
		return nil, err
	}
	exts := make([]Extension, len(nums))
	for i, n := range nums {
		exts[i] = Extension{Number: n, Name: defaultNames[n]}
	}
	return exts, nil
}
