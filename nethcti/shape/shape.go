package shape

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
)

// ErrNotObject is a native JSON that is not an object.
var ErrNotObject = errors.New("shape: the native JSON is not an object")

// Decode decodes a JSON object keeping numbers exact (json.Number).
func Decode(b []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil || m == nil {
		return nil, ErrNotObject
	}
	return m, nil
}

func num(v any) float64 {
	n, _ := v.(json.Number)
	f, _ := n.Float64()
	return f
}

// Queue adds NethCTI's names to a native queue (decoded by Decode), its
// members' and its waiting callers'.
func Queue(q map[string]any) {
	name, _ := q["queue"].(string)
	for to, from := range map[string]string{"completedCallsCount": "completed", "abandonedCallsCount": "abandoned",
		"avgHoldTime": "holdTime", "avgTalkTime": "talkTime", "serviceLevelTimePeriod": "serviceLevel"} {
		if v, ok := q[from]; ok {
			q[to] = v
		}
	}
	pct := 0.0
	if c := num(q["completed"]); c > 0 {
		pct = num(q["completedInServiceLevel"]) * 100 / c
	}
	q["serviceLevelPercentage"] = strconv.FormatFloat(pct, 'f', 1, 64)
	if ms, ok := q["members"].(map[string]any); ok {
		for _, m := range ms {
			if m, ok := m.(map[string]any); ok {
				Member(m, name)
			}
		}
	}
	if ws, ok := q["waitingCallers"].(map[string]any); ok {
		for _, c := range ws {
			if c, ok := c.(map[string]any); ok {
				c["queue"], c["id"], c["waitingTime"] = name, c["channel"], c["waitingSince"]
			}
		}
	}
}

// Member adds NethCTI's names to a native queue member of queue ("":
// the member's own queue field).
func Member(m map[string]any, queue string) {
	if queue != "" {
		m["queue"] = queue
	}
	m["callsTakenCount"], m["lastPausedInReason"] = m["callsTaken"], m["pausedReason"]
}

// Parking adds NethCTI's names to a native parking space at now (Unix
// seconds): parkedCaller {} when free, else the parked caller's parking
// and timeout, the seconds left (at least 0).
func Parking(p map[string]any, now int64) {
	pc, ok := p["parkedCaller"].(map[string]any)
	if !ok {
		p["parkedCaller"] = map[string]any{}
		return
	}
	left := int64(num(p["timeout"])) - (now*1000-int64(num(pc["parkedAt"])))/1000
	pc["parking"], pc["timeout"] = p["parking"], max(left, 0)
}

// Object decodes one native object, reshapes it with f and encodes it.
func Object(b []byte, f func(map[string]any)) ([]byte, error) {
	m, err := Decode(b)
	if err != nil {
		return nil, err
	}
	f(m)
	return json.Marshal(m)
}
