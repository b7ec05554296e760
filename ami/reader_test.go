package ami

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func readAll(t testing.TB, data []byte, cfg ReaderConfig) ([]Message, *Reader) {
	t.Helper()
	r := NewReader(bufio.NewReader(bytes.NewReader(data)), cfg)
	if _, err := r.ReadBanner(); err != nil {
		t.Fatalf("banner: %v", err)
	}
	var out []Message
	for {
		m, err := r.ReadMessage()
		if err == io.EOF {
			return out, r
		}
		if err != nil {
			t.Fatalf("message %d: %v", len(out), err)
		}
		out = append(out, m)
	}
}

func TestReadRecordings(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.ami")
	if len(files) == 0 {
		t.Fatal("no recordings in testdata")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			msgs, r := readAll(t, data, ReaderConfig{})
			// Every frame of a recording ends with an empty CRLF line.
			want := bytes.Count(data, []byte("\r\n\r\n"))
			if len(msgs) != want {
				t.Errorf("got %d messages, want %d", len(msgs), want)
			}
			if st := r.Stats(); st.Garbage != 0 || st.Oversized != 0 || st.Bytes != uint64(len(data)) {
				t.Errorf("stats = %+v, want no garbage and %d bytes", st, len(data))
			}
			for _, m := range msgs {
				if m.Kind() != KindEvent && m.Kind() != KindResponse {
					t.Fatalf("unexpected frame %v", m)
				}
			}
		})
	}
}

func TestReadParkStrayLF(t *testing.T) {
	data, err := os.ReadFile("testdata/park_retrieve.ami")
	if err != nil {
		t.Fatal(err)
	}
	msgs, _ := readAll(t, data, ReaderConfig{})
	for _, m := range msgs {
		if m.ActionID() == "park-2" {
			if m.Response() != "Success" || m.Get("message") != "Park successful" {
				t.Fatalf("park response = %v", m)
			}
			return
		}
	}
	t.Fatal("park response not found")
}

func TestMessageOrderCaseRepeats(t *testing.T) {
	in := "Banner/1.0\r\nEvent: VarSet\r\nChanVariable: a=1\r\nchanvariable: b=2\nActionID: X1\r\nValue:   spaced \r\n\r\n"
	msgs, _ := readAll(t, []byte(in), ReaderConfig{})
	if len(msgs) != 1 {
		t.Fatalf("got %d messages", len(msgs))
	}
	m := msgs[0]
	want := []Header{{"Event", "VarSet"}, {"ChanVariable", "a=1"}, {"chanvariable", "b=2"}, {"ActionID", "X1"}, {"Value", "spaced "}}
	if len(m.Headers()) != len(want) {
		t.Fatalf("headers = %v", m.Headers())
	}
	for i := range want {
		if m.Headers()[i] != want[i] {
			t.Errorf("header %d = %+v, want %+v", i, m.Headers()[i], want[i])
		}
	}
	if got := m.Values("CHANVARIABLE"); len(got) != 2 || got[1] != "b=2" {
		t.Errorf("Values = %q", got)
	}
	if m.Get("actionid") != "X1" || m.Event() != "VarSet" || m.Kind() != KindEvent {
		t.Errorf("lookup failed: %v", m)
	}
}

func TestReadGarbageAndLimits(t *testing.T) {
	long := strings.Repeat("x", 200)
	in := "Asterisk Call Manager/11.0.0\r\n" +
		"garbage line\r\n\r\n\r\n" + // skipped, counted
		"Event: A\r\nno colon here\r\nK: v\r\n\r\n" + // bad line dropped, frame kept
		"Event: B\r\nK: nul\x00inside\r\n\r\n" +
		"Event: C\r\n\r\n" +
		"Event: Big\r\nK: " + long + "\r\n\r\n" + // oversized line: the stream is broken
		"Event: D\r\n\r\n"
	var kinds []string
	r := NewReader(bufio.NewReaderSize(bytes.NewReader([]byte(in)), 16), ReaderConfig{MaxLine: 100,
		OnJunk: func(j Junk, sample []byte) {
			kinds = append(kinds, j.String()+"="+string(sample[:min(len(sample), 12)]))
		}})
	if _, err := r.ReadBanner(); err != nil {
		t.Fatal(err)
	}
	var names []string
	var err error
	for {
		var m Message
		if m, err = r.ReadMessage(); err != nil {
			break
		}
		names = append(names, m.Event()+"/"+m.Get("K"))
	}
	if !errors.Is(err, ErrProtocol) || !errors.Is(err, ErrTooLarge) {
		t.Errorf("err = %v, want a protocol error, too large", err)
	}
	if got := strings.Join(names, ","); got != "A/v,B/,C/" {
		t.Errorf("frames = %s", got)
	}
	if st := r.Stats(); st.Garbage != 3 || st.Oversized != 1 {
		t.Errorf("stats = %+v, want garbage 3 oversized 1", st)
	}
	want := "garbage_line=garbage line,garbage_line=no colon her,control_byte=K: nul\x00insid,line_too_long=K: xxxxxxxxx"
	if got := strings.Join(kinds, ","); got != want {
		t.Errorf("junk reported:\n%s\nwant\n%s", got, want)
	}
}

func TestReadTruncated(t *testing.T) {
	r := NewReader(bufio.NewReader(strings.NewReader("Asterisk Call Manager/11.0.0\r\nEvent: A\r\nK: v")), ReaderConfig{})
	r.ReadBanner()
	_, err := r.ReadMessage()
	if !errors.Is(err, ErrProtocol) || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("err = %v, want protocol unexpected EOF", err)
	}
	r = NewReader(bufio.NewReader(strings.NewReader("")), ReaderConfig{})
	if _, err := r.ReadBanner(); !errors.Is(err, ErrProtocol) {
		t.Fatalf("banner err = %v", err)
	}
}

func TestWriteRejectsInjection(t *testing.T) {
	cases := map[string]Message{
		"lf in value":  NewAction("Originate", "Channel", "PJSIP/201\nAction: Command"),
		"cr in value":  NewAction("Originate", "Exten", "201\rX"),
		"nul in value": NewAction("Originate", "Exten", "201\x00"),
		"lf in key":    NewAction("Originate", "Exten\n", "201"),
		"colon in key": NewAction("Originate", "A:B", "1"),
		"empty key":    NewAction("Originate", "", "1"),
	}
	for name, m := range cases {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			w := bufio.NewWriter(&b)
			err := WriteMessage(w, m)
			w.Flush()
			var he *HeaderError
			if err == nil || !errors.As(err, &he) {
				t.Fatalf("err = %v, want HeaderError", err)
			}
			if b.Len() != 0 {
				t.Fatalf("wrote %q despite the error", b.String())
			}
			if _, err := AppendMessage(nil, m); err == nil {
				t.Fatal("AppendMessage accepted it")
			}
		})
	}
}

func TestWriteReadRoundTrip(t *testing.T) {
	m := NewAction("Originate", "ActionID", "7", "Channel", "PJSIP/201", "Variable", "A=1", "Variable", "B=2")
	var b bytes.Buffer
	b.WriteString("Asterisk Call Manager/11.0.0\r\n")
	w := bufio.NewWriter(&b)
	if err := WriteMessage(w, m); err != nil {
		t.Fatal(err)
	}
	w.Flush()
	app, _ := AppendMessage(nil, m)
	if !bytes.Equal(app, b.Bytes()[len("Asterisk Call Manager/11.0.0\r\n"):]) {
		t.Fatal("AppendMessage and WriteMessage differ")
	}
	msgs, _ := readAll(t, b.Bytes(), ReaderConfig{})
	if len(msgs) != 1 || len(msgs[0].Headers()) != len(m.Headers()) {
		t.Fatalf("got %v", msgs)
	}
	for i := range m.Headers() {
		if msgs[0].Headers()[i] != m.Headers()[i] {
			t.Fatalf("header %d: %v != %v", i, msgs[0].Headers()[i], m.Headers()[i])
		}
	}
}

func TestStringRedactsSecret(t *testing.T) {
	s := NewAction("Login", "Username", "u", "Secret", "hunter2").String()
	if strings.Contains(s, "hunter2") {
		t.Fatalf("secret in %q", s)
	}
}

func TestReadMaxGarbage(t *testing.T) {
	in := "Asterisk Call Manager/11.0.0\r\n" + strings.Repeat("junk\r\n", 5) // no blank line: one endless frame
	r := NewReader(bufio.NewReader(strings.NewReader(in)), ReaderConfig{MaxGarbage: 3})
	r.ReadBanner()
	if _, err := r.ReadMessage(); !errors.Is(err, ErrProtocol) || r.Stats().Garbage != 4 {
		t.Fatalf("err = %v, stats %+v", err, r.Stats())
	}
}

// Messages are values: deriving two messages from one base never lets one
// see the other's headers, and the base is never changed.
func TestMessageIsAValue(t *testing.T) {
	base := NewAction("Originate", "Channel", "PJSIP/201")
	a := base.Add("Exten", "202")
	b := base.Add("Exten", "203")
	if a.Get("Exten") != "202" || b.Get("Exten") != "203" || base.Len() != 2 {
		t.Fatalf("a=%v b=%v base=%v", a, b, base)
	}
	c := a.Set("exten", "204").Insert(1, "ActionID", "7").Del("channel")
	if got := c.String(); got != "Action=Originate ActionID=7 Exten=204" {
		t.Errorf("derived = %q", got)
	}
	if got := a.String(); got != "Action=Originate Channel=PJSIP/201 Exten=202" {
		t.Errorf("a changed: %q", got)
	}
	if m := NewMessage(); m.Len() != 0 || m.Kind() != KindUnknown || m.Get("x") != "" {
		t.Errorf("empty message: %v", m)
	}
}

// TestMessageLookup holds Get and Lookup to their contract: the first
// header of that name, Asterisk's case before any other, then any case;
// keys of the same length, first or last byte told apart.
func TestMessageLookup(t *testing.T) {
	m := NewMessage(
		Header{"Event", "Newstate"}, Header{"Context", "from-internal"}, Header{"Channel", "PJSIP/201-00000001"},
		Header{"uniqueid", "lower"}, Header{"Uniqueid", "1"}, Header{"Linkedid", "2"}, Header{"Uniqueid", "3"},
		Header{"", "empty key"}, Header{"X", "one byte"}, Header{"Exten", ""}, Header{"\u212Aey", "kelvin"},
	)
	for _, tc := range []struct {
		key, want string
		ok        bool
	}{
		{"Channel", "PJSIP/201-00000001", true}, // Context: same length and first byte
		{"Linkedid", "2", true},                 // Uniqueid: same length and last byte
		{"Uniqueid", "1", true},                 // exact case first, the first of repeats
		{"UNIQUEID", "lower", true},             // then any case, first in order
		{"context", "from-internal", true},
		{"", "empty key", true},
		{"X", "one byte", true},
		{"x", "one byte", true},
		{"Exten", "", true},
		{"Extens", "", false},
		{"KEY", "kelvin", true}, // K folds to U+212A KELVIN SIGN, 3 bytes: a longer key
		{"\u212AEY", "kelvin", true},
		{"\u212Aeyx", "", false},
		{"Missing", "", false},
	} {
		if v, ok := m.Lookup(tc.key); v != tc.want || ok != tc.ok {
			t.Errorf("Lookup(%q) = %q, %v; want %q, %v", tc.key, v, ok, tc.want, tc.ok)
		}
		if v := m.Get(tc.key); v != tc.want {
			t.Errorf("Get(%q) = %q, want %q", tc.key, v, tc.want)
		}
	}
}
