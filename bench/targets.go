package main

import (
	"fmt"
	"io"
)

// target is one row of the summary's targets: a holdfast figure,
// optionally as a ratio to a reference figure, against a bound.
type target struct {
	measure string
	// holdfast's figure: scenario and metric.
	scenario, metric string
	// vs, if set, makes the target a ratio: holdfast ÷ the reference, which
	// is rueidislock's figure, or the best peer's when vs is "best peer".
	vs     string
	higher bool    // the better figure is the higher one
	bound  float64 // the target: ≥ bound if higher, else ≤ bound
	target string  // the target as the table prints it
}

const vsBestPeer = "best peer"

// targets are what holdfast is expected to hold in every run: ahead of
// rueidislock on the uncontended path, several times the best peer's
// handoffs on a hot lock, and small per-hold, per-Client and per-waiter
// costs.
var targets = []target{
	{"uncontended cycles/s vs rueidislock", "uncontended", "cycles_per_s", libRueidislock, true, 1.2, "≥ 1.2×"},
	{"client CPU µs per cycle vs rueidislock", "uncontended", "client_cpu_us_per_cycle", libRueidislock, false, 0.8, "≤ 0.8×"},
	{"Redis CPU µs per cycle vs rueidislock", "uncontended", "redis_cpu_us_per_cycle", libRueidislock, false, 1.0, "≤ 1.0×"},
	{"allocations per cycle", "uncontended", "allocs_per_cycle", "", false, 16, "≤ 16"},
	{"hot lock handoffs/s (to another goroutine) vs best peer", "hotlock", "handoffs_per_s", vsBestPeer, true, 3, "≥ 3×"},
	{"hot lock p99 release→acquire in RTTs", "hotlock", "handoff_p99_rtt", "", false, 5, "≤ 5 RTT"},
	{"heap per held lock (watchdog)", "renewal", "heap_bytes_per_lock", "", false, 1024, "≤ 1 KiB"},
	{"heap per Client", "clients", "heap_bytes_per_client", "", false, 100 * 1024, "≤ 100 KiB"},
	{"Redis commands while 100 waiters wait 5 s", "waiting", "waiter_commands", "", false, 20, "≤ 20"},
}

// printTargets writes the targets as a markdown table: one row per target
// with holdfast's figure, the reference it is compared with, the ratio and
// whether this run meets it.
func (r *results) printTargets(w io.Writer) {
	fmt.Fprintln(w, "| measure | target | holdfast | compared with | this run | met |")
	fmt.Fprintln(w, "|---|---|---:|---|---:|---|")
	for _, g := range targets {
		hf, ok := r.get(g.scenario, libHoldfast, g.metric)
		if !ok {
			fmt.Fprintf(w, "| %s | %s | – | | not measured (%s %s) | |\n", g.measure, g.target, g.scenario, g.metric)
			continue
		}
		value, ref := hf, ""
		if g.vs != "" {
			var peer float64
			var who string
			if g.vs == vsBestPeer {
				peer, who, ok = r.bestPeer(g.scenario, g.metric, g.higher)
			} else {
				peer, ok = r.get(g.scenario, g.vs, g.metric)
				who = g.vs
			}
			if !ok || peer == 0 {
				fmt.Fprintf(w, "| %s | %s | %s | | not measured (%s %s of %s) | |\n", g.measure, g.target, fmtNum(hf), g.scenario, g.metric, g.vs)
				continue
			}
			value, ref = hf/peer, fmt.Sprintf("%s %s", who, fmtNum(peer))
		}
		met := value <= g.bound
		if g.higher {
			met = value >= g.bound
		}
		shown := fmtNum(value)
		if g.vs != "" {
			shown = fmt.Sprintf("%.2f×", value)
		}
		mark := "**no**"
		if met {
			mark = "yes"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", g.measure, g.target, fmtNum(hf), ref, shown, mark)
	}
}
