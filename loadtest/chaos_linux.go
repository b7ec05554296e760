package loadtest

import (
	"os/exec"
	"syscall"
)

// dieWithParent has the kernel kill serve when the suite dies, so an
// interrupted run leaves no bridge behind.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
