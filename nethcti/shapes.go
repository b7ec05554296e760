package nethcti

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
)

// NethCTI's small shapes over the native queue and parking reads: the
// native fields stay, NethCTI's names are added beside them (the web
// app's queue view reads waitingTime and the counters by their NethCTI
// names; its parking view a free space as {} and the seconds left).
//
//   - queue: completedCallsCount, abandonedCallsCount, avgHoldTime,
//     avgTalkTime, serviceLevelTimePeriod, serviceLevelPercentage
//     (completedInServiceLevel / completed, as app_queue's
//     ServicelevelPerf: "%.1f");
//   - queue member: queue, callsTakenCount, lastPausedInReason;
//   - waiting caller: queue, id (the channel), waitingTime (ms when
//     waiting began, the native waitingSince);
//   - parking: parkedCaller {} when free; a parked caller's parking and
//     timeout, the seconds left before it returns (the space's timeout
//     less the time parked, at least 0): made again each second.

// decodeObject decodes a JSON object keeping numbers exact.
func decodeObject(b []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil || m == nil {
		return nil, errBadNative
	}
	return m, nil
}

func num(v any) float64 {
	n, _ := v.(json.Number)
	f, _ := n.Float64()
	return f
}

func nethQueue(q map[string]any) {
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
				m["queue"], m["callsTakenCount"], m["lastPausedInReason"] = name, m["callsTaken"], m["pausedReason"]
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

func nethParking(p map[string]any, now int64) {
	pc, ok := p["parkedCaller"].(map[string]any)
	if !ok {
		p["parkedCaller"] = map[string]any{}
		return
	}
	left := int64(num(p["timeout"])) - (now*1000-int64(num(pc["parkedAt"])))/1000
	pc["parking"], pc["timeout"] = p["parking"], max(left, 0)
}

// eachEntity reshapes a collection (keyed objects) or, when single, one
// object.
func eachEntity(body []byte, single bool, f func(map[string]any)) ([]byte, error) {
	if !single {
		return eachEntityKeyed(body, func(_ string, e map[string]any) { f(e) })
	}
	m, err := decodeObject(body)
	if err != nil {
		return nil, err
	}
	f(m)
	return json.Marshal(m)
}

// eachEntityKeyed reshapes every object of a collection, given its key.
func eachEntityKeyed(body []byte, f func(key string, e map[string]any)) ([]byte, error) {
	m, err := decodeObject(body)
	if err != nil {
		return nil, err
	}
	for k, v := range m {
		e, ok := v.(map[string]any)
		if !ok {
			return nil, errBadNative
		}
		f(k, e)
	}
	return json.Marshal(m)
}

func (f *Front) queues(w http.ResponseWriter, r *http.Request, id Identity, _ bool) int {
	path, single := "/astproxy/queues", false
	if q := r.PathValue("queue"); q != "" {
		path, single = "/astproxy/queue/"+q, true
	}
	return f.reshaped(w, r, id, path, 0, func(body []byte, _ *userNames, _ *http.Request, _ int64) ([]byte, error) {
		return eachEntity(body, single, nethQueue)
	})
}

func (f *Front) parkings(w http.ResponseWriter, r *http.Request, id Identity, _ bool) int {
	return f.reshaped(w, r, id, "/astproxy/parkings", f.now().Unix(), func(body []byte, _ *userNames, _ *http.Request, now int64) ([]byte, error) {
		return eachEntity(body, false, func(p map[string]any) { nethParking(p, now) })
	})
}
