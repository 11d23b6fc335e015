// Command bench compares holdfast with redsync, redislock and rueidislock on
// one Redis server, scenario by scenario, and checks holdfast against its
// targets. See README.md.
//
// Every scenario runs each library in turn against the same server in the
// same run, interleaved over several rounds (the order rotates each round),
// and reports the median of the rounds.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"
)

// env is what every scenario shares.
type env struct {
	srv        *server
	admin      *admin
	quick      bool
	retryDelay time.Duration // redsync's and redislock's retry interval
	libs       []string
	res        *results
	info       runInfo
	// cl, while set, is the cluster that clients connect to, and whose
	// masters snapshot, redisCPU and flush read (the scale scenario's
	// cluster rows); nil: srv.
	cl *redisCluster
}

func (e *env) notef(format string, args ...any) {
	e.res.notes = append(e.res.notes, fmt.Sprintf(format, args...))
	fmt.Fprintf(os.Stderr, "note: "+format+"\n", args...)
}

func (e *env) logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
}

// rounds is the number of interleaved rounds of the throughput scenarios.
func (e *env) rounds() int {
	if e.quick {
		return 3
	}
	return 5
}

// order returns the libraries in the order of round r: rotated, so that no
// library always runs first (on a cold server) or last.
func (e *env) order(r int) []string {
	n := len(e.libs)
	out := make([]string, 0, n)
	for i := range n {
		out = append(out, e.libs[(r+i)%n])
	}
	return out
}

type scenario struct {
	name string
	run  func(*env) error
}

var scenarios = []scenario{
	{"uncontended", runUncontended},
	{"hotlock", runHotlock},
	{"fairlock", runFairlock},
	{"rwlock", runRWLock},
	{"semaphore", runSemaphore},
	{"waiting", runWaiting},
	{"renewal", runRenewal},
	{"scale", runScale},
	{"clients", runClients},
	{"ceiling", runCeiling},
	{"layouts", runLayouts},
	{"timerwheel", runTimerwheel},
	{"lockall", runLockAll},
	{"redlock", runRedLock},
	{"election", runElection},
}

func main() {
	os.Exit(run())
}

func run() int {
	redisAddr := flag.String("redis", "", "address of a loopback Redis to use (default: start redis-server on a free loopback port)")
	quick := flag.Bool("quick", false, "a shorter run, all of it within 5 minutes")
	jsonOut := flag.String("json", "", "write every figure to this file as a JSON array")
	mdOut := flag.String("markdown", "", "write the summary section (run facts, key figures, targets) to this file: a new file, or between its markers if it has them")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file (samples are labelled scenario= and library=)")
	only := flag.String("only", "", "comma-separated scenarios to run (default: all)")
	libs := flag.String("libs", strings.Join(allLibs, ","), "comma-separated libraries to compare")
	retry := flag.Duration("retry", defaultRetryDelay, "retry interval of redsync and redislock, which poll")
	flag.Parse()

	start := time.Now()
	e := &env{quick: *quick, retryDelay: *retry, res: newResults(), info: newRunInfo()}
	for _, l := range strings.Split(*libs, ",") {
		if l = strings.TrimSpace(l); l != "" {
			e.libs = append(e.libs, l)
		}
	}
	for _, l := range e.libs {
		if !contains(knownLibs, l) {
			fmt.Fprintf(os.Stderr, "bench: unknown library %q (have %s)\n", l, strings.Join(knownLibs, ", "))
			return 2
		}
	}
	want := map[string]bool{}
	for _, s := range strings.Split(*only, ",") {
		if s = strings.TrimSpace(s); s != "" {
			want[s] = true
		}
	}
	for s := range want {
		if !contains(runNames(), s) {
			fmt.Fprintf(os.Stderr, "bench: unknown scenario %q (have %s)\n", s, strings.Join(runNames(), ", "))
			return 2
		}
	}

	if *mdOut != "" {
		// Refuse a file that could not be updated now, not after the run.
		if err := checkMarkdownTarget(*mdOut); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
	}

	if *redisAddr != "" {
		if err := checkLoopback(*redisAddr); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		e.srv = &server{addr: *redisAddr}
	} else {
		srv, err := startServer()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		e.srv = srv
	}
	defer e.srv.stop()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		e.srv.stop()
		os.Exit(130)
	}()

	a, err := dialAdmin(e.srv.addr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: Redis at %s: %v\n", e.srv.addr, err)
		return 1
	}
	defer a.close()
	e.admin = a
	if v, err := a.do("INFO", "server"); err == nil {
		if s, ok := v.(string); ok {
			for _, line := range strings.Split(s, "\n") {
				if strings.HasPrefix(line, "redis_version:") {
					e.res.redisVersion = strings.TrimSpace(strings.TrimPrefix(line, "redis_version:"))
				}
			}
		}
	}

	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer func() {
			pprof.StopCPUProfile()
			f.Close()
		}()
	}

	failed := false
	for _, s := range scenarios {
		if len(want) > 0 && !want[s.name] {
			continue
		}
		t0 := time.Now()
		e.logf("%s …", s.name)
		if err := s.run(e); err != nil {
			e.notef("%s failed: %v", s.name, err)
			failed = true
		}
		e.logf("%s done in %.1fs", s.name, time.Since(t0).Seconds())
		e.flush()
	}

	e.res.elapsed = time.Since(start)
	e.res.settings = e.settings()
	e.info.loadEnd = loadAvg()
	e.res.printMarkdown(os.Stdout, e)
	if *jsonOut != "" {
		if err := e.res.writeJSON(*jsonOut); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	if *mdOut != "" {
		if err := e.res.writeMarkdownSection(*mdOut, e); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	if failed {
		return 1
	}
	return 0
}

func (e *env) settings() string {
	mode := "full"
	if e.quick {
		mode = "quick"
	}
	where := "its own redis-server"
	if !e.srv.owned {
		where = "the given server"
	}
	return fmt.Sprintf("%s run on %s %s (Redis %s), %d rounds per throughput scenario, redsync/redislock retry every %v, took %.1f s",
		mode, where, e.srv.addr, e.res.redisVersion, e.rounds(), e.retryDelay, e.res.elapsed.Seconds())
}

// runNames are the scenarios -only takes.
func runNames() []string {
	var out []string
	for _, s := range scenarios {
		out = append(out, s.name)
	}
	return out
}

// scenarioNames are the scenarios figures go under, in the tables' order.
func scenarioNames() []string {
	var out []string
	for _, s := range scenarios {
		if s.name == "scale" {
			out = append(out, scaleScenarios()...) // its figures go by size
			continue
		}
		out = append(out, s.name)
	}
	return out
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// labelled runs fn with pprof labels naming the scenario and library, so the
// goroutines a client starts inside fn carry them too, and a profile of the
// whole run can be cut down to one library (go tool pprof -tagfocus).
func labelled(scen, lib string, fn func(ctx context.Context)) {
	pprof.Do(context.Background(), pprof.Labels("scenario", scen, "library", lib), fn)
}
