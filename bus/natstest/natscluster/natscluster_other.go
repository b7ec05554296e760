//go:build !linux

package natscluster

import "os/exec"

// dieWithParent: only Linux has a parent-death signal; an interrupted
// test may leave its nats-servers running here.
func dieWithParent(*exec.Cmd) {}
