package calls

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
)

var dumpFlag = flag.String("dump", "", "print the extension/queue/parking changes of this recording, message by message")

// recording is a parsed .ami file: the messages and the byte offset where
// each one ends (to join them with the .timing file).
type recording struct {
	name string
	msgs []ami.Message
	ends []uint64
}

func loadRecording(t testing.TB, name string) *recording {
	t.Helper()
	// The first set lives in ami/testdata, later ones here.
	data, err := os.ReadFile(filepath.Join("testdata", name+".ami"))
	if os.IsNotExist(err) {
		data, err = os.ReadFile(filepath.Join("..", "ami", "testdata", name+".ami"))
	}
	if err != nil {
		t.Fatal(err)
	}
	r := ami.NewReader(bufio.NewReader(bytes.NewReader(data)), ami.ReaderConfig{})
	if _, err := r.ReadBanner(); err != nil {
		t.Fatal(err)
	}
	rec := &recording{name: name}
	for {
		m, err := r.ReadMessage()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		rec.msgs = append(rec.msgs, m)
		rec.ends = append(rec.ends, r.Stats().Bytes)
	}
	return rec
}

// loadTiming reads testdata/<name>.timing (copied from the recording
// session) into one wall time per message, matched by end offset.
func loadTiming(t testing.TB, rec *recording) []time.Time {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", rec.name+".timing"))
	if err != nil {
		t.Fatal(err)
	}
	byEnd := map[uint64]time.Time{}
	for _, line := range strings.Split(string(data), "\n")[1:] {
		f := strings.Split(line, "\t")
		if len(f) < 5 || f[2] != "<<" {
			continue
		}
		off, _ := strconv.ParseUint(f[3], 10, 64)
		n, _ := strconv.ParseUint(f[4], 10, 64)
		ts, err := time.Parse("2006-01-02T15:04:05.999999Z", f[1])
		if err != nil {
			t.Fatal(err)
		}
		byEnd[off+n] = ts
	}
	out := make([]time.Time, len(rec.msgs))
	var last time.Time
	for i, end := range rec.ends {
		if ts, ok := byEnd[end]; ok {
			last = ts
		}
		out[i] = last
	}
	return out
}

// testConfig is the PBX of the recordings: trunk endpoint "trunk".
func testConfig(now func() time.Time) Config {
	return Config{Now: now, Trunks: []string{"trunk"}}
}

// ami3Devices are the devices of user 201 on the PBX of the third set
// (AstDB DEVICE/<device>/user, testdata/ami3-astdb.txt), which the first
// two sets do not have.
var ami3Devices = map[string]string{"91201": "201", "92201": "201"}

// recordingConfig is testConfig for the recording name: the third set's
// with its devices.
func recordingConfig(name string, now func() time.Time) Config {
	cfg := testConfig(now)
	switch name {
	case "multi_device_user", "ringgroup_local", "queue_local_members", "park_by_transfer":
		cfg.Devices = ami3Devices
	}
	return cfg
}

func summary(m ami.Message) string {
	s := m.Event()
	if s == "" {
		s = m.Response()
	}
	for _, k := range []string{"Channel", "DestChannel", "Exten", "Device", "State", "Queue", "ParkingSpace"} {
		if v := m.Get(k); v != "" {
			s += " " + k + "=" + v
		}
	}
	return s
}

func TestDumpReplay(t *testing.T) {
	if *dumpFlag == "" {
		t.Skip("use -dump NAME")
	}
	rec := loadRecording(t, *dumpFlag)
	times := loadTiming(t, rec)
	i := 0
	e := New(recordingConfig(*dumpFlag, func() time.Time { return times[i] }))
	var last uint64
	for i = range rec.msgs {
		e.Apply(rec.msgs[i])
		s := e.Publish()
		cs, _ := e.Feed().Since(last)
		last = s.Seq
		if len(cs) == 0 {
			continue
		}
		fmt.Printf("#%d %s\n", i, summary(rec.msgs[i]))
		for _, c := range cs {
			var v any
			_ = json.Unmarshal(c.Data, &v)
			if x, ok := v.(map[string]any); ok {
				delete(x, "cf")
				delete(x, "cfb")
				delete(x, "cfu")
				delete(x, "dnd")
				if cv, ok := x["conversations"].(map[string]any); ok {
					for _, c := range cv {
						cm := c.(map[string]any)
						for _, k := range []string{"callId", "linkedId", "uniqueId", "owner", "recording", "startTime"} {
							delete(cm, k)
						}
					}
				}
			}
			b, _ := json.Marshal(v)
			fmt.Printf("   %s %s %s\n", c.Type, c.Key, b)
		}
	}
	fmt.Printf("stats %+v\n", e.Stats())
}
