package webhook

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/ctibridge/ctibridge/history"
)

// Event is the JSON body of one POST (docs/webhooks.md).
type Event struct {
	// ID is the idempotency key: "<linkedid>:<uniqueid>:<type>" for call
	// events (uniqueid: the extension's channel), with ":<sequence>" for
	// a CDR. A receiver drops an ID it has already seen.
	ID   string `json:"id"`
	Type string `json:"type"`
	// At is when it happened (the engine's publish, or the CDR's take),
	// RFC 3339 with milliseconds, UTC.
	At        string `json:"at"`
	Extension string `json:"extension,omitempty"`
	// PBX is the named PBX of the call when several are followed
	// (docs/operations.md "Several PBXs"); absent for the default PBX. A
	// named PBX's extension, linkedid, uniqueid and queue are then
	// qualified with its name ("site2:201"), as everywhere else.
	PBX      string `json:"pbx,omitempty"`
	LinkedID string `json:"linkedid"`
	UniqueID string `json:"uniqueid"`
	// Direction is "in" (the extension is called) or "out" (it calls).
	Direction string `json:"direction,omitempty"`
	// Number and Name are the counterpart's: the caller for an incoming
	// call, the called party for an outgoing one.
	Number string `json:"number,omitempty"`
	Name   string `json:"name,omitempty"`
	// Phonebook is the phonebook's name for Number (ringing only), when
	// it has one.
	Phonebook *Match `json:"phonebook,omitempty"`
	// Queue is the queue the call came through, if any.
	Queue string `json:"queue,omitempty"`
	// Trunk says the counterpart is outside the PBX.
	Trunk bool `json:"trunk,omitempty"`
	// Answered and Duration (talk time in whole seconds) are set on
	// hangup.
	Answered *bool  `json:"answered,omitempty"`
	Duration *int64 `json:"duration,omitempty"`
	// CDR is the history row (cdr only).
	CDR *history.CDR `json:"cdr,omitempty"`
}

// Match is a phonebook match.
type Match struct {
	Name string `json:"name"`
}

// record is one queued event, as stored in a webhook's queue (one JSON
// line): the headers' values and the body, encoded once.
type record struct {
	ID   string          `json:"i"`
	Type string          `json:"t"`
	Body json.RawMessage `json:"b"`
}

// stamp formats ms since the epoch for Event.At.
func stamp(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// cdrEvent builds the cdr event of c, of PBX pbx ("" the default), taken
// at ms.
func cdrEvent(c *history.CDR, pbx string, ms int64) Event {
	return Event{
		ID:   c.LinkedID + ":" + c.UniqueID + ":" + TypeCDR + ":" + strconv.Itoa(c.Sequence),
		Type: TypeCDR, At: stamp(ms), PBX: pbx, LinkedID: c.LinkedID, UniqueID: c.UniqueID, CDR: c,
	}
}
