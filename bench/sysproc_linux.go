package main

import (
	"os/exec"
	"syscall"
)

// setDeathSignal makes the kernel kill the child redis-server if the
// benchmark dies without cleaning up.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
