//go:build linux

package main

import (
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"unsafe"
)

// forwarded are the signals exec passes on to CMD.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

// childAttr puts CMD in a process group of its own, so that a signal or a
// kill reaches its children too, and has the kernel SIGKILL it when holdfast
// dies, so that it cannot outlive the lock it ran under. When holdfast runs
// in the foreground of a terminal, CMD's group takes the foreground (an
// interactive CMD would otherwise stop on SIGTTIN when it reads the
// terminal); restore gives it back to holdfast's group once CMD is done.
func childAttr() (attr *syscall.SysProcAttr, restore func()) {
	attr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	own := syscall.Getpgrp()
	if fg, ok := foregroundGroup(0); !ok || fg != own {
		return attr, func() {}
	}
	attr.Foreground, attr.Ctty = true, 0 // Ctty is CMD's stdin, the terminal
	return attr, func() {
		// A background group that takes the terminal gets SIGTTOU unless it
		// ignores it.
		signal.Ignore(syscall.SIGTTOU)
		defer signal.Reset(syscall.SIGTTOU)
		pgrp := int32(own)
		syscall.Syscall(syscall.SYS_IOCTL, 0, syscall.TIOCSPGRP, uintptr(unsafe.Pointer(&pgrp)))
	}
}

// foregroundGroup returns the foreground process group of the terminal on
// fd, or false when fd is not a terminal.
func foregroundGroup(fd uintptr) (int, bool) {
	var pgrp int32
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCGPGRP, uintptr(unsafe.Pointer(&pgrp))); errno != 0 {
		return 0, false
	}
	return int(pgrp), true
}

// signalGroup sends sig to CMD's process group.
func signalGroup(cmd *exec.Cmd, sig syscall.Signal) {
	syscall.Kill(-cmd.Process.Pid, sig)
}
