//go:build linux

package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/holdfast/holdfast/internal/redistest"
	"github.com/holdfast/holdfast/scripts"
)

// alive reports whether process pid runs (a zombie is dead: it runs no code).
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	rest := stat[bytes.LastIndexByte(stat, ')')+1:]
	return !bytes.HasPrefix(bytes.TrimSpace(rest), []byte("Z"))
}

// readPid waits for file to hold a pid and returns it.
func readPid(t *testing.T, file string) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		data, _ := os.ReadFile(file)
		if s := strings.TrimSpace(string(data)); strings.HasSuffix(string(data), "\n") {
			pid, err := strconv.Atoi(s)
			if err != nil {
				t.Fatalf("pid file %q", data)
			}
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatal("the command never wrote its pid")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// gone waits up to limit for pid to end and reports whether it did.
func gone(pid int, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for alive(pid) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

// SIGKILL of exec kills its command at once (parent-death signal), so the
// command cannot run on while the lock's key expires and another exec takes
// it.
func TestExecKilledTakesCommandWithIt(t *testing.T) {
	srv := redistest.Start(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	// exec replaces the shell: the pid written is the command's, exec's child.
	cmd := holdfastCmd("exec", "--redis", srv.Addr, "doomed", "--", "sh", "-c", "echo $$ > "+pidFile+"; exec sleep 30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	child := readPid(t, pidFile)
	t.Cleanup(func() { syscall.Kill(child, syscall.SIGKILL) })
	if !alive(child) {
		t.Fatal("the command is not running")
	}
	cmd.Process.Kill()
	cmd.Wait()
	if !gone(child, time.Second) {
		t.Fatal("the command still runs 1s after exec was killed")
	}
}

// SIGTERM to exec reaches the whole process group: a command started by
// `sh -c` (not exec'ed, so a grandchild of holdfast) stops at once, and exec
// exits with the shell's status.
func TestExecSignalReachesGrandchild(t *testing.T) {
	srv := redistest.Start(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	cmd := holdfastCmd("exec", "--redis", srv.Addr, "grouped", "--", "sh", "-c", "sleep 30 & echo $! > "+pidFile+"; wait")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	grandchild := readPid(t, pidFile)
	t.Cleanup(func() { syscall.Kill(grandchild, syscall.SIGKILL) })
	cmd.Process.Signal(syscall.SIGTERM)
	if !gone(grandchild, time.Second) {
		t.Fatal("the sh -c grandchild still runs 1s after exec got SIGTERM")
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		cmd.Process.Kill()
		t.Fatal("exec did not end after its command did")
	}
	if code := cmd.ProcessState.ExitCode(); code == 0 {
		t.Fatalf("exec exited 0 after SIGTERM")
	}
	if n, _ := srv.Do(t, "EXISTS", scripts.LockKey("grouped")).AsInt64(); n != 0 {
		t.Fatal("lock left held after the command was stopped")
	}
}

// A lost lock stops the command's whole group, grandchildren included.
func TestExecLockLostStopsGroup(t *testing.T) {
	srv := redistest.Start(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	cmd := holdfastCmd("exec", "--redis", srv.Addr, "--watchdog", "600ms", "--kill-after", "2s", "lost", "--",
		"sh", "-c", "sleep 30 & echo $! > "+pidFile+"; wait")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	grandchild := readPid(t, pidFile)
	t.Cleanup(func() { syscall.Kill(grandchild, syscall.SIGKILL) })
	srv.Do(t, "DEL", scripts.LockKey("lost"))
	// The watchdog renews every 200ms and finds the key gone.
	if !gone(grandchild, 3*time.Second) {
		t.Fatal("the grandchild still runs 3s after the lock was lost")
	}
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != exitLost {
		t.Fatalf("exit %d, want %d", code, exitLost)
	}
}
