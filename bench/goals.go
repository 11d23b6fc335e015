package main

import (
	"fmt"
	"time"
)

// renewalSetup is what the renewal check is computed from, set by runRenewal.
var renewalSetup struct {
	held     int
	watchdog time.Duration
}

type check struct {
	ok   bool
	text string
}

func verdict(cs []check) string {
	for _, c := range cs {
		if !c.ok {
			return "**NOT MET**"
		}
	}
	return "**MET**"
}

func (r *results) line(name string, cs []check) string {
	s := name + ": " + verdict(cs) + " —"
	for i, c := range cs {
		mark := "ok"
		if !c.ok {
			mark = "no"
		}
		if i > 0 {
			s += ";"
		}
		s += fmt.Sprintf(" %s [%s]", c.text, mark)
	}
	return s
}

// bestPeer returns the best peer value of a metric: the highest if higher
// is better, else the lowest.
func (r *results) bestPeer(scenario, metric string, higher bool) (float64, string, bool) {
	var best float64
	var who string
	found := false
	for _, lib := range []string{libRedsync, libRedislock, libRueidislock} {
		v, ok := r.get(scenario, lib, metric)
		if !ok {
			continue
		}
		if !found || higher && v > best || !higher && v < best {
			best, who, found = v, lib, true
		}
	}
	return best, who, found
}

// goals checks holdfast, scenario by scenario, against what it should do
// better than its peers and its own floors.
func (r *results) goals() []string {
	var out []string
	missing := func(name, what string) { out = append(out, fmt.Sprintf("%s: not measured (%s missing)", name, what)) }

	// uncontended: throughput against the peers and the EVALSHA ceiling.
	if hf, ok := r.get("uncontended", libHoldfast, "cycles_per_s"); !ok {
		missing("uncontended", "holdfast cycles_per_s")
	} else {
		var cs []check
		if peer, who, ok := r.bestPeer("uncontended", "cycles_per_s", true); ok {
			cs = append(cs, check{hf >= 1.5*peer, fmt.Sprintf("%.0f cycles/s vs best peer %s %.0f = %.2f× (want ≥ 1.5×)", hf, who, peer, hf/peer)})
		}
		if es, ok := r.get("ceiling", refBenchmark, "evalsha_per_s"); ok {
			cs = append(cs, check{hf >= 0.6*es/2, fmt.Sprintf("%.0f cycles/s vs EVALSHA ceiling %.0f/2 = %.0f%% (want ≥ 60%%)", hf, es, 100*hf/(es/2))})
		}
		out = append(out, r.line("uncontended", cs))
	}

	// hotlock: handoffs, fairness, tail in round trips, commands.
	if hf, ok := r.get("hotlock", libHoldfast, "handoffs_per_s"); !ok {
		missing("hotlock", "holdfast handoffs_per_s")
	} else {
		var cs []check
		if peer, who, ok := r.bestPeer("hotlock", "handoffs_per_s", true); ok {
			cs = append(cs, check{hf >= 3*peer, fmt.Sprintf("%.0f handoffs/s vs best peer %s %.0f = %.2f× (want ≥ 3×)", hf, who, peer, hf/peer)})
		}
		if ms, ok := r.get("hotlock", libHoldfast, "min_share"); ok {
			cs = append(cs, check{ms >= 0.25, fmt.Sprintf("min_share %.3f (want ≥ 0.25)", ms)})
		}
		// In round trips measured in the hot lock's own rounds, when it
		// has them; else against the ceiling's PING.
		if x, ok := r.get("hotlock", libHoldfast, "handoff_p99_rtt"); ok {
			cs = append(cs, check{x <= 5, fmt.Sprintf("handoff p99 = %.1f RTT (want ≤ 5)", x)})
		} else if p99, ok := r.get("hotlock", libHoldfast, "handoff_p99_us"); ok {
			if rtt, ok := r.get("ceiling", refBenchmark, "rtt_p50_us"); ok {
				cs = append(cs, check{p99 <= 5*rtt, fmt.Sprintf("handoff p99 %.0f µs vs RTT %.1f µs = %.1f× (want ≤ 5×)", p99, rtt, p99/rtt)})
			}
		}
		if cmds, ok := r.get("hotlock", libHoldfast, "commands_per_handoff"); ok {
			cs = append(cs, check{cmds <= 3, fmt.Sprintf("%.2f commands/handoff (want ≤ 3)", cmds)})
		}
		out = append(out, r.line("hotlock", cs))
	}

	// waiting: what waiters cost while they wait, and how fast they drain.
	if hf, ok := r.get("waiting", libHoldfast, "waiter_commands"); !ok {
		missing("waiting", "holdfast waiter_commands")
	} else {
		var cs []check
		if peer, who, ok := r.bestPeer("waiting", "waiter_commands", false); ok {
			cs = append(cs, check{hf <= 0.1*peer, fmt.Sprintf("%.0f waiter commands vs best peer %s %.0f = %.1f%% (want ≤ 10%%)", hf, who, peer, 100*hf/max(peer, 1))})
		}
		if d, ok := r.get("waiting", libHoldfast, "drain_ms"); ok {
			if peer, who, ok := r.bestPeer("waiting", "drain_ms", false); ok {
				cs = append(cs, check{d <= peer/3, fmt.Sprintf("drain %.1f ms vs best peer %s %.1f ms = %.2f× (want ≤ 1/3)", d, who, peer, d/peer)})
			}
		}
		out = append(out, r.line("waiting", cs))
	}

	// renewal: commands per second for the holds, heap, losses.
	if rate, ok := r.get("renewal", libHoldfast, "renewal_commands_per_s"); !ok || renewalSetup.held == 0 {
		missing("renewal", "holdfast renewal_commands_per_s")
	} else {
		limit := 1.1 * float64(renewalSetup.held) / (renewalSetup.watchdog / 3).Seconds() / 100
		cs := []check{{rate <= limit, fmt.Sprintf("%.1f renewal commands/s for %d locks (want ≤ %.1f = 1.1 × %d/%v/100)", rate, renewalSetup.held, limit, renewalSetup.held, renewalSetup.watchdog/3)}}
		if h, ok := r.get("renewal", libHoldfast, "heap_bytes_per_lock"); ok {
			cs = append(cs, check{h <= 2048, fmt.Sprintf("heap %.0f B/lock (want ≤ 2048)", h)})
		}
		if l, ok := r.get("renewal", libHoldfast, "lost_holds"); ok {
			cs = append(cs, check{l == 0, fmt.Sprintf("%.0f lost holds (want 0)", l)})
		}
		out = append(out, r.line("renewal", cs))
	}

	// timerwheel: against time.AfterFunc.
	if ns, ok := r.get("timerwheel", libHoldfast, "ns_per_op"); !ok {
		missing("timerwheel", "holdfast ns_per_op")
	} else {
		var cs []check
		if af, ok := r.get("timerwheel", refAfterFunc, "ns_per_op"); ok {
			cs = append(cs, check{ns*3 <= af, fmt.Sprintf("%.1f ns/op vs time.AfterFunc %.1f ns/op = %.2f× faster (want ≥ 3×)", ns, af, af/ns)})
		}
		b, ok1 := r.get("timerwheel", libHoldfast, "bytes_per_op")
		ab, ok2 := r.get("timerwheel", refAfterFunc, "bytes_per_op")
		if ok1 && ok2 {
			cs = append(cs, check{b < ab, fmt.Sprintf("%.0f B/op vs time.AfterFunc %.0f B/op (want fewer)", b, ab)})
		}
		out = append(out, r.line("timerwheel", cs))
	}
	return out
}
