package nethcti

import (
	"encoding/json"
	"net/http"

	"github.com/ctibridge/ctibridge/nethcti/shape"
)

// The queue and parking reads are reshaped by package shape (shared with
// the socket).

// decodeObject decodes a JSON object keeping numbers exact.
func decodeObject(b []byte) (map[string]any, error) {
	m, err := shape.Decode(b)
	if err != nil {
		return nil, errBadNative
	}
	return m, nil
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
		return eachEntity(body, single, shape.Queue)
	})
}

func (f *Front) parkings(w http.ResponseWriter, r *http.Request, id Identity, _ bool) int {
	return f.reshaped(w, r, id, "/astproxy/parkings", f.now().Unix(), func(body []byte, _ *userNames, _ *http.Request, now int64) ([]byte, error) {
		return eachEntity(body, false, func(p map[string]any) { shape.Parking(p, now) })
	})
}
