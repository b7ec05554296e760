package main

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// runLoadtest is `ctibridge loadtest http|ws|e2e ...`.
func runLoadtest(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, "usage: ctibridge loadtest http|ws|e2e [flags]\n")
		return errors.New("loadtest: no mode given")
	}
	return fmt.Errorf("loadtest: unknown mode %q", args[0])
}
