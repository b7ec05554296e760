package wsframe

import (
	"strings"
	"testing"
)

func TestFields(t *testing.T) {
	frame := []byte(`{"op":"event","seq":1234,"type":"extenUpdate","at":1796027700000,"data":{"seq":9}}`)
	for _, c := range []struct {
		key  string
		want uint64
	}{
		{`"seq":`, 1234},
		{`"at":`, 1796027700000},
		{`"missing":`, 0},
	} {
		if got := UintField(frame, c.key); got != c.want {
			t.Errorf("UintField(%s) = %d, want %d", c.key, got, c.want)
		}
	}
	if got := StringField(frame, `"op":"`); got != "event" {
		t.Errorf(`StringField(op) = %q`, got)
	}
	if got := StringField(frame, `"nope":"`); got != "" {
		t.Errorf(`StringField(nope) = %q`, got)
	}
	// Past the first 200 bytes a key is not looked for.
	late := []byte(`{"op":"snapshot","data":"` + strings.Repeat("x", 300) + `","seq":7}`)
	if got := UintField(late, `"seq":`); got != 0 {
		t.Errorf("UintField past 200 bytes = %d, want 0", got)
	}
}
