package nethcti

import (
	"os"
	"path/filepath"
	"testing"
)

// TestParseEndpointTypes: the longest matching prefix names the type.
func TestParseEndpointTypes(t *testing.T) {
	ty, err := ParseEndpointTypes([]string{"9=mobile", "92=webrtc"})
	if err != nil || ty("92201") != "webrtc" || ty("93201") != "mobile" || ty("201") != "" {
		t.Errorf("longest prefix: %v", err)
	}
	if _, err := ParseEndpointTypes([]string{"93=fax"}); err == nil {
		t.Error("93=fax taken")
	}
}

// TestLoadSecret: a missing secret is made (0600) and read back the same;
// a short one is refused.
func TestLoadSecret(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d", "secret")
	a, err := LoadSecret(path)
	if err != nil || len(a) != 64 {
		t.Fatalf("made %q, %v", a, err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, %v", fi.Mode(), err)
	}
	if b, err := LoadSecret(path); err != nil || string(b) != string(a) {
		t.Errorf("read back %q, %v; want %q", b, err, a)
	}
	os.WriteFile(path, []byte("short\n"), 0o600)
	if _, err := LoadSecret(path); err == nil {
		t.Error("a 5-byte secret taken")
	}
}
