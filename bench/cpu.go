package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuMeter measures, over a window, the CPU of this process (getrusage) and
// of the Redis server (INFO cpu: used_cpu_sys + used_cpu_user). Libraries
// run one at a time, so the process's CPU in a window is the library's
// (plus the harness's own loop, the same for every library), and so is the
// server's, on a server this run started. On a server given by -redis the
// server's figure includes whatever else uses it.
type cpuMeter struct {
	e         *env
	wall      time.Time
	self      time.Duration
	redis     time.Duration
	haveRedis bool
}

func (e *env) startCPU() cpuMeter {
	m := cpuMeter{e: e, self: selfCPU()}
	m.redis, m.haveRedis = e.redisCPU()
	m.wall = time.Now()
	return m
}

// cpuWindow is what a meter saw from its start to stop.
type cpuWindow struct {
	wall, self, redis time.Duration
	haveRedis         bool
}

func (m cpuMeter) stop() cpuWindow {
	w := cpuWindow{wall: time.Since(m.wall), self: selfCPU() - m.self}
	if m.haveRedis {
		if now, ok := m.e.redisCPU(); ok {
			w.redis, w.haveRedis = now-m.redis, true
		}
	}
	return w
}

// report describes the window, e.g. "redis-server 58% CPU = 21.0 µs per
// cycle, bench 116% CPU = 44.0 µs per cycle", for units of work done in it.
func (w cpuWindow) report(units float64, unit string) string {
	s := fmt.Sprintf("bench %.0f%% CPU = %.1f µs of bench CPU per %s", 100*float64(w.self)/float64(w.wall), us(w.self)/units, unit)
	if w.haveRedis {
		s = fmt.Sprintf("redis-server %.0f%% CPU = %.1f µs per %s, ", 100*float64(w.redis)/float64(w.wall), us(w.redis)/units, unit) + s
	}
	return s
}

// record adds the window's client and Redis CPU per unit of work to the
// results under scenario and lib.
func (w cpuWindow) record(r *results, scenario, lib string, units float64) {
	if units <= 0 {
		return
	}
	r.add(scenario, lib, "client_cpu_us_per_cycle", us(w.self)/units)
	if w.haveRedis {
		r.add(scenario, lib, "redis_cpu_us_per_cycle", us(w.redis)/units)
	}
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// redisCPU returns the CPU the server has used so far, from INFO cpu (its
// own getrusage, to the microsecond).
func (e *env) redisCPU() (time.Duration, bool) {
	if e.cl != nil {
		return e.cl.redisCPU()
	}
	v, err := e.admin.do("INFO", "cpu")
	if err != nil {
		return 0, false
	}
	s, _ := v.(string)
	return parseRedisCPU(s)
}

// parseRedisCPU sums used_cpu_sys and used_cpu_user of an INFO cpu reply.
func parseRedisCPU(info string) (time.Duration, bool) {
	var total float64
	found := 0
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || k != "used_cpu_sys" && k != "used_cpu_user" {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, false
		}
		total += f
		found++
	}
	if found != 2 {
		return 0, false
	}
	return time.Duration(total * float64(time.Second)), true
}

// loadAvg returns the first field of /proc/loadavg (Linux), or "" if it
// cannot be read: the machine's load, which the report states.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}
