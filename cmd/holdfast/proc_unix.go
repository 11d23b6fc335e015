//go:build unix && !linux

package main

import (
	"os"
	"os/exec"
	"syscall"
)

// forwarded are the signals exec passes on to CMD.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

// childAttr puts CMD in a process group of its own, so that a signal or a
// kill reaches its children too. These systems have no parent-death signal:
// a holdfast killed by SIGKILL leaves CMD running (see exec's help).
func childAttr() (*syscall.SysProcAttr, func()) {
	return &syscall.SysProcAttr{Setpgid: true}, func() {}
}

// signalGroup sends sig to CMD's process group.
func signalGroup(cmd *exec.Cmd, sig syscall.Signal) {
	syscall.Kill(-cmd.Process.Pid, sig)
}
