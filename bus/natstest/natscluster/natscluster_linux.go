package natscluster

import (
	"os/exec"
	"syscall"
)

// dieWithParent has the kernel kill the server when the test process
// dies, so an interrupted test leaves no nats-server behind.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
