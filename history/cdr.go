package history

import (
	"hash/fnv"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ctibridge/ctibridge/ami"
)

// CDR is one call detail record: one leg of a call.
type CDR struct {
	CallDate      time.Time `json:"calldate"`
	CLID          string    `json:"clid"`
	Src           string    `json:"src"`
	Dst           string    `json:"dst"`
	DContext      string    `json:"dcontext"`
	Channel       string    `json:"channel"`
	DstChannel    string    `json:"dstchannel"`
	LastApp       string    `json:"lastapp"`
	LastData      string    `json:"lastdata"`
	Duration      int       `json:"duration"`
	Billsec       int       `json:"billsec"`
	Disposition   string    `json:"disposition"`
	AMAFlags      string    `json:"amaflags"`
	AccountCode   string    `json:"accountcode"`
	UniqueID      string    `json:"uniqueid"`
	LinkedID      string    `json:"linkedid"`
	UserField     string    `json:"userfield"`
	Sequence      int       `json:"sequence"`
	PeerAccount   string    `json:"peeraccount"`
	RecordingFile string    `json:"recordingfile"`
}

// FromEvent turns an AMI Cdr event (cdr_manager) into a CDR. StartTime is
// read in loc (the PBX's time zone). LinkedID and Sequence are taken from
// the event when cdr_manager.conf maps them ([mappings] linkedid =>
// LinkedID, sequence => Sequence; recommended); otherwise LinkedID is
// linked (what the caller saw in channel events, or the UniqueID) and
// Sequence is derived from the record's content, the same on every
// replica, so (uniqueid, sequence) still identifies it. ok is false for
// anything but a Cdr event with a UniqueID.
func FromEvent(m ami.Message, loc *time.Location, linked func(uniqueid string) string) (CDR, bool) {
	if m.Event() != ami.EventCdr {
		return CDR{}, false
	}
	c := CDR{
		CLID: m.Get("CallerID"), Src: m.Get("Source"), Dst: m.Get("Destination"),
		DContext: m.Get("DestinationContext"), Channel: m.Get("Channel"), DstChannel: m.Get("DestinationChannel"),
		LastApp: m.Get("LastApplication"), LastData: m.Get("LastData"), Disposition: m.Get("Disposition"),
		AMAFlags: m.Get("AMAFlags"), AccountCode: m.Get("AccountCode"), UniqueID: m.Get("UniqueID"),
		UserField: m.Get("UserField"), LinkedID: m.Get("LinkedID"), PeerAccount: m.Get("PeerAccount"),
		RecordingFile: m.Get("RecordingFile"),
	}
	if c.UniqueID == "" {
		return CDR{}, false
	}
	for _, f := range []*string{&c.CLID, &c.Src, &c.Dst, &c.DContext, &c.Channel, &c.DstChannel, &c.LastApp, &c.LastData,
		&c.Disposition, &c.AMAFlags, &c.AccountCode, &c.UniqueID, &c.UserField, &c.LinkedID, &c.PeerAccount, &c.RecordingFile} {
		*f = clean(*f)
	}
	c.Duration, _ = int32Field(m.Get("Duration"))
	c.Billsec, _ = int32Field(m.Get("BillableSeconds"))
	if t, err := time.ParseInLocation(time.DateTime, m.Get("StartTime"), loc); err == nil {
		c.CallDate = t
	}
	if c.LinkedID == "" && linked != nil {
		c.LinkedID = linked(c.UniqueID)
	}
	if c.LinkedID == "" {
		c.LinkedID = c.UniqueID
	}
	if s, ok := int32Field(m.Get("Sequence")); ok {
		c.Sequence = s
	} else {
		h := fnv.New32a()
		for _, v := range []string{m.Get("StartTime"), m.Get("AnswerTime"), m.Get("EndTime"), c.Channel, c.DstChannel,
			c.Src, c.Dst, c.LastApp, c.LastData, c.Disposition} {
			h.Write([]byte(v))
			h.Write([]byte{0})
		}
		c.Sequence = int(h.Sum32() & 0x7fffffff)
	}
	return c, true
}

// clean makes s storable in a text column of either database: valid
// UTF-8 (bad bytes become U+FFFD, as JSON would make them) without NUL.
func clean(s string) string {
	if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "")
}

// int32Field parses a number that fits the integer columns; ok is false
// for anything else.
func int32Field(s string) (int, bool) {
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return 0, false
	}
	return int(n), true
}

// callerName is the name in a CLID such as `"Alice" <201>`.
func callerName(clid string) string {
	if i := strings.LastIndexByte(clid, '<'); i >= 0 {
		clid = clid[:i]
	}
	return strings.Trim(strings.TrimSpace(clid), `"`)
}
