package phonebook

import "testing"

func TestNormalize(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"+39 0721 405516", "721405516"},
		{"0039721405516", "721405516"},
		{"0721405516", "721405516"},
		{"0721-40.55/16", "721405516"},
		{"(0721) 405516", "721405516"},
		{"+39 333 1234567", "3331234567"},
		{"3331234567", "3331234567"},
		{"+44 20 7946 0018", "+442079460018"},
		{"0044 20 7946 0018", "+442079460018"},
		{"201", "201"},
		{"", ""},
		{"+", ""},
		{"alice", ""},
		{"sip:201@pbx", ""},
		{"12+3", ""},
		{"0", "0"},
		{"00", "0"},
	} {
		if got := italy.Normalize(tc.in); got != tc.want {
			t.Errorf("Normalize(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got := (Normalizer{}).Normalize("+39 0721 405516"); got != "+390721405516" {
		t.Errorf("zero Normalizer: %q", got)
	}
}

func TestIndexLookup(t *testing.T) {
	x := NewIndex(italy)
	if x.Lookup("0721405516") != "" {
		t.Fatal("empty index answered")
	}
	x.Set([]Contact{
		{ID: 1, Type: TypePublic, Name: "Mario Rossi", WorkPhone: "+39 0721 405516"},
		{ID: 2, Type: TypePublic, Name: "Later", WorkPhone: "0721405516"},
		{ID: 3, Type: TypePrivate, OwnerID: "alice", Name: "Secret", CellPhone: "3339999999"},
		{ID: 4, Type: TypePublic, Company: "ACME", Fax: "+44 20 7946 0018"},
	})
	for in, want := range map[string]string{
		"0039721405516": "Mario Rossi", "0721405516": "Mario Rossi", "+390721405516": "Mario Rossi",
		"3339999999": "", "004420 7946 0018": "ACME", "": "", "x": "",
	} {
		if got := x.Lookup(in); got != want {
			t.Errorf("Lookup(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestIndexLookupDoesNotAllocate: the engine calls Lookup on its own
// goroutine for every new caller (calls.Config.NameLookup), so it must not
// allocate. scripts/test.sh runs it without -race too.
func TestIndexLookupDoesNotAllocate(t *testing.T) {
	x := NewIndex(italy)
	x.Set([]Contact{{ID: 1, Type: TypePublic, Name: "Mario Rossi", WorkPhone: "+39 0721 405516"}})
	for _, in := range []string{"+39 0721 405516", "0721405516", "3339999999"} {
		if n := testing.AllocsPerRun(100, func() { x.Lookup(in) }); n != 0 {
			t.Errorf("Lookup(%q) allocates %v times", in, n)
		}
	}
}

func BenchmarkIndexLookup(b *testing.B) {
	x := NewIndex(italy)
	cs := make([]Contact, 100000)
	for i := range cs {
		cs[i] = Contact{ID: int64(i), Type: TypePublic, Name: "Name", WorkPhone: "0721" + itoa6(i)}
	}
	x.Set(cs)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if x.Lookup("+39 0721 055516") == "" {
			b.Fatal("miss")
		}
	}
}

func itoa6(i int) string {
	b := []byte("000000")
	for j := 5; j >= 0; j-- {
		b[j] = byte('0' + i%10)
		i /= 10
	}
	return string(b)
}
