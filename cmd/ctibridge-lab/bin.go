package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
)

// The module whose cmd/ctibridge a run builds when it finds no binary.
const modulePath = "github.com/ctibridge/ctibridge"

// binHelp is the --bin flags' usage.
const binHelp = "the ctibridge binary (default: $CTIBRIDGE_BIN, ctibridge beside this binary, built from the source tree, or on $PATH)"

// bridgeBinary is the ctibridge binary a run starts: flagged (--bin), else
// $CTIBRIDGE_BIN, else ctibridge beside this binary (both built into one
// directory), else built from the source tree the working directory is in
// (`go run ./cmd/ctibridge-lab` measures the tree's bridge, not an
// installed one), else ctibridge on $PATH.
func bridgeBinary(ctx context.Context, flagged string, getenv func(string) string, stderr io.Writer) (string, error) {
	if flagged != "" {
		return flagged, nil
	}
	if env := getenv("CTIBRIDGE_BIN"); env != "" {
		return env, nil
	}
	if self, err := os.Executable(); err == nil {
		beside := filepath.Join(filepath.Dir(self), "ctibridge")
		if st, err := os.Stat(beside); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return beside, nil
		}
	}
	if root := moduleRoot(); root != "" {
		return buildBridge(ctx, root, stderr)
	}
	if p, err := exec.LookPath("ctibridge"); err == nil {
		return p, nil
	}
	return "", errors.New("no ctibridge binary: give --bin or $CTIBRIDGE_BIN, or run from the source tree (go build -o DIR/ctibridge ./cmd/ctibridge)")
}

// moduleRoot is the directory of ctibridge's go.mod holding the working
// directory, "" outside the source tree.
func moduleRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil {
			first, _, _ := bytes.Cut(mod, []byte("\n"))
			if string(bytes.TrimSpace(first)) == "module "+modulePath {
				return dir
			}
			return ""
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// buildBridge builds root's cmd/ctibridge into the user's cache
// directory, one per source tree (two worktrees' runs must not swap
// binaries under each other); go build's cache makes a rebuild of an
// unchanged tree quick.
func buildBridge(ctx context.Context, root string, stderr io.Writer) (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	sum := sha256.Sum256([]byte(root))
	dir := filepath.Join(cache, "ctibridge-lab", hex.EncodeToString(sum[:6]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "ctibridge")
	fmt.Fprintf(stderr, "ctibridge-lab: building %s/cmd/ctibridge into %s\n", root, bin)
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/ctibridge")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/ctibridge: %v\n%s", err, out)
	}
	return bin, nil
}
