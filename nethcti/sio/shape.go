package sio

import (
	"encoding/json"
	"errors"
)

// party is one side of a conversation as NethCTI names it: chSource is
// the channel of the side that called, chDest the called one's.
type party struct {
	CallerNum    string `json:"callerNum"`
	CallerName   string `json:"callerName"`
	InConference bool   `json:"inConference"`
}

// convIn is what the shape reads of a conversation.
type convIn struct {
	Owner           string `json:"owner"`
	Direction       string `json:"direction"`
	CounterpartNum  string `json:"counterpartNum"`
	CounterpartName string `json:"counterpartName"`
	InConference    bool   `json:"inConference"`
}

// nethctiExtension is an extension's JSON from the engine (in the class
// of its reader: its numbers are hidden or not already) in NethCTI's
// shape: "username" (the user it belongs to, "" for none), and on each
// conversation chSource and chDest, the caller's and the called side's
// number and name, made of the owner and the counterpart as the
// conversation's direction says. Everything else is as the engine wrote
// it, so REST's reads and these events agree.
func nethctiExtension(data []byte, username string) ([]byte, error) {
	var x map[string]json.RawMessage
	if err := json.Unmarshal(data, &x); err != nil {
		return nil, err
	}
	var name string
	if raw, ok := x["name"]; ok {
		if err := json.Unmarshal(raw, &name); err != nil {
			return nil, err
		}
	}
	var raws map[string]json.RawMessage
	if err := json.Unmarshal(x["conversations"], &raws); err != nil {
		return nil, err
	}
	if raws == nil {
		return nil, errors.New("sio: an extension without conversations")
	}
	convs := make(map[string]map[string]json.RawMessage, len(raws))
	for id, raw := range raws {
		var in convIn
		var c map[string]json.RawMessage
		if err := json.Unmarshal(raw, &in); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, err
		}
		own := party{CallerNum: in.Owner, CallerName: name, InConference: in.InConference}
		other := party{CallerNum: in.CounterpartNum, CallerName: in.CounterpartName, InConference: in.InConference}
		src, dst := own, other
		if in.Direction == "in" {
			src, dst = other, own
		}
		c["chSource"], _ = json.Marshal(src)
		c["chDest"], _ = json.Marshal(dst)
		convs[id] = c
	}
	var err error
	if x["conversations"], err = json.Marshal(convs); err != nil {
		return nil, err
	}
	x["username"], _ = json.Marshal(username)
	return json.Marshal(x)
}
