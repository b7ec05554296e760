package nethcti

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ParseEndpointTypes reads rules of the form prefix=type (type webrtc,
// nethlink, mobile or physical) into Config.EndpointTypes: an
// extension's type by the longest prefix that matches it, "" when none
// does; nil without rules.
func ParseEndpointTypes(rules []string) (func(string) string, error) {
	types := map[string]string{}
	for _, f := range rules {
		prefix, typ, ok := strings.Cut(f, "=")
		prefix, typ = strings.TrimSpace(prefix), strings.TrimSpace(typ)
		if !ok || prefix == "" || (typ != "webrtc" && typ != "nethlink" && typ != "mobile" && typ != "physical") {
			return nil, fmt.Errorf("%q is not prefix=webrtc|nethlink|mobile|physical", f)
		}
		types[prefix] = typ
	}
	if len(types) == 0 {
		return nil, nil
	}
	return func(exten string) string {
		best, typ := -1, ""
		for p, t := range types {
			if strings.HasPrefix(exten, p) && len(p) > best {
				best, typ = len(p), t
			}
		}
		return typ
	}, nil
}

// LoadSecret reads the token secret (Config.Secret) from path, making it
// (32 random bytes, hex, mode 0600) when the file does not exist, so
// tokens survive restarts.
func LoadSecret(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		var k [32]byte
		rand.Read(k[:])
		b = []byte(hex.EncodeToString(k[:]))
		if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
			return nil, err
		}
		if err := os.WriteFile(path, append(b, '\n'), 0o600); err != nil {
			return nil, err
		}
		return b, nil
	}
	if err != nil {
		return nil, err
	}
	b = []byte(strings.TrimSpace(string(b)))
	if len(b) < 16 {
		return nil, fmt.Errorf("%s: the secret must be at least 16 bytes", path)
	}
	return b, nil
}
