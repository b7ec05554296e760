package loadtest

import (
	"sync"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/ami/amiproxy"
)

// The faults the AMI proxy injects into the bridge's live connections.
const (
	faultKill     = amiproxy.Kill
	faultHalfOpen = amiproxy.HalfOpen
	faultLongLine = amiproxy.LongLine
	// faultPartition is the kernel's: not the proxy's (chaos_ami.go).
	faultPartition = "partition"
)

// amiProxy sits between the bridge and pbxsim's manager port
// (amiproxy.Proxy) and notes the Cdr events it forwards to the bridge, so
// the db scenario knows which call records a bridge was given and when.
type amiProxy struct {
	*amiproxy.Proxy

	mu   sync.Mutex
	cdrs []cdrSeen
}

// cdrSeen is one Cdr event forwarded to a bridge.
type cdrSeen struct {
	uniqueid string
	at       time.Time // when it was handed to the bridge's socket
}

func newAMIProxy(upstream string) (*amiProxy, error) {
	p := &amiProxy{}
	px, err := amiproxy.New(upstream, func(m ami.Message, at time.Time) {
		if m.Event() == ami.EventCdr {
			p.mu.Lock()
			p.cdrs = append(p.cdrs, cdrSeen{uniqueid: m.Get("UniqueID"), at: at})
			p.mu.Unlock()
		}
	})
	if err != nil {
		return nil, err
	}
	p.Proxy = px
	return p, nil
}

// cdrsSeen returns the Cdr events forwarded so far.
func (p *amiProxy) cdrsSeen() []cdrSeen {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]cdrSeen(nil), p.cdrs...)
}
