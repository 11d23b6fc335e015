//go:build windows

package main

import (
	"os"
	"os/exec"
	"syscall"
)

// forwarded are the signals exec passes on to CMD.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM}

// childAttr: Windows has neither process groups that take signals nor a
// parent-death signal; CMD is stopped only by exec itself.
func childAttr() (*syscall.SysProcAttr, func()) { return nil, func() {} }

// signalGroup stops CMD: Windows delivers no signals but a kill.
func signalGroup(cmd *exec.Cmd, _ syscall.Signal) { cmd.Process.Kill() }
