package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuMeter measures the CPU the redis-server (when this run started it) and
// this process used over a window, as a percentage of one core: it tells a
// server-bound run from a client-bound one.
type cpuMeter struct {
	pid        int
	wall       time.Time
	server     time.Duration
	self       time.Duration
	haveServer bool
}

func (e *env) startCPU() cpuMeter {
	m := cpuMeter{wall: time.Now(), self: selfCPU()}
	if e.srv.owned && e.srv.cmd != nil && e.srv.cmd.Process != nil {
		m.pid = e.srv.cmd.Process.Pid
		m.server, m.haveServer = procCPU(m.pid)
	}
	return m
}

// report describes the window so far, e.g. "redis-server 58% CPU, bench
// 116% CPU = 44 µs of bench CPU per cycle", for units of work done in it.
func (m cpuMeter) report(units float64, unit string) string {
	wall := time.Since(m.wall)
	self := selfCPU() - m.self
	s := fmt.Sprintf("bench %.0f%% CPU = %.1f µs of bench CPU per %s", 100*float64(self)/float64(wall), us(self)/units, unit)
	if m.haveServer {
		if now, ok := procCPU(m.pid); ok {
			s = fmt.Sprintf("redis-server %.0f%% CPU, ", 100*float64(now-m.server)/float64(wall)) + s
		}
	}
	return s
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU reads utime+stime of a process from /proc (Linux; clock ticks of
// 1/100 s).
func procCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, false
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(u+st) * 10 * time.Millisecond, true
}
