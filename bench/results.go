package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"
	"time"
)

// figure is one reported number, as it appears in the JSON.
type figure struct {
	Scenario string  `json:"scenario"`
	Library  string  `json:"library"`
	Metric   string  `json:"metric"`
	Value    float64 `json:"value"`
	Unit     string  `json:"unit"`
	// Rounds are the value of each round the median was taken from, in
	// the order they ran; Min and Max their spread.
	Rounds []float64 `json:"rounds,omitempty"`
	Min    float64   `json:"min"`
	Max    float64   `json:"max"`
}

// units of every metric.
var units = map[string]string{
	"cycles_per_s":                     "1/s",
	"contended_cycles_per_s":           "1/s",
	"acquire_p50_us":                   "us",
	"acquire_p99_us":                   "us",
	"allocs_per_cycle":                 "allocs",
	"client_cpu_us_per_cycle":          "us",
	"redis_cpu_us_per_cycle":           "us",
	"self_reacquires_per_s":            "1/s",
	"handoff_p99_rtt":                  "RTT",
	"heap_bytes_per_client":            "bytes",
	"heap_bytes_per_client_with_redis": "bytes",
	"handoffs_per_s":                   "1/s",
	"handoff_p50_us":                   "us",
	"handoff_p99_us":                   "us",
	"commands_per_handoff":             "commands",
	"self_reacquire_frac":              "fraction",
	"min_share":                        "fraction",
	"fifo_violations":                  "grants",
	"waiter_commands":                  "commands",
	"idle_commands":                    "commands",
	"drain_ms":                         "ms",
	"renewal_commands_per_s":           "commands/s",
	"heap_bytes_per_lock":              "bytes",
	"heap_bytes_per_lock_at_grant":     "bytes",
	"lost_holds":                       "holds",
	"client_cpu_percent":               "% of a core",
	"server_script_calls_per_s":        "calls/s",
	"holds_per_script_call":            "holds",
	"subscriptions":                    "commands",
	"evalsha_per_s":                    "1/s",
	"rtt_p50_us":                       "us",
	"ns_per_op":                        "ns",
	"bytes_per_op":                     "bytes",
	// rwlock
	"reads_per_s":             "1/s",
	"writes_per_s":            "1/s",
	"writer_wait_p99_us":      "us",
	"lock_reads_per_s":        "1/s",
	"lock_writes_per_s":       "1/s",
	"lock_writer_wait_p99_us": "us",
	"read_speedup":            "x",
	// semaphore
	"grants_per_s":            "1/s",
	"commands_per_grant":      "commands",
	"grant_wait_p99_us":       "us",
	"max_holders":             "holders",
	"lock_grants_per_s":       "1/s",
	"lock_commands_per_grant": "commands",
	"lock_grant_wait_p99_us":  "us",
	// election
	"handover_p50_us":        "us",
	"handover_p99_us":        "us",
	"observer_notice_p50_us": "us",
	"observer_notice_p99_us": "us",
	"stalled_handovers":      "handovers",
}

// metricOrder is the order of rows within a scenario.
var metricOrder = []string{
	"cycles_per_s", "contended_cycles_per_s", "acquire_p50_us", "acquire_p99_us", "allocs_per_cycle",
	"handoffs_per_s", "self_reacquires_per_s", "handoff_p50_us", "handoff_p99_us", "handoff_p99_rtt", "commands_per_handoff", "self_reacquire_frac", "min_share",
	"client_cpu_us_per_cycle", "redis_cpu_us_per_cycle",
	"fifo_violations",
	"waiter_commands", "subscriptions", "idle_commands", "drain_ms",
	"renewal_commands_per_s", "server_script_calls_per_s", "holds_per_script_call", "heap_bytes_per_lock", "heap_bytes_per_lock_at_grant", "lost_holds", "client_cpu_percent",
	"heap_bytes_per_client", "heap_bytes_per_client_with_redis",
	"evalsha_per_s", "rtt_p50_us",
	"ns_per_op", "bytes_per_op",
	"reads_per_s", "writes_per_s", "writer_wait_p99_us",
	"lock_reads_per_s", "lock_writes_per_s", "lock_writer_wait_p99_us", "read_speedup",
	"grants_per_s", "commands_per_grant", "grant_wait_p99_us", "max_holders",
	"lock_grants_per_s", "lock_commands_per_grant", "lock_grant_wait_p99_us",
	"handover_p50_us", "handover_p99_us", "observer_notice_p50_us", "observer_notice_p99_us", "stalled_handovers",
}

type key struct{ scenario, library, metric string }

// results collects the rounds' samples and reports their medians.
type results struct {
	samples      map[key][]float64
	order        []key
	notes        []string
	redisVersion string
	settings     string
	elapsed      time.Duration
}

func newResults() *results { return &results{samples: map[key][]float64{}} }

// add records one round's value of a metric.
func (r *results) add(scenario, library, metric string, v float64) {
	if _, ok := units[metric]; !ok {
		panic("bench: unknown metric " + metric)
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return
	}
	k := key{scenario, library, metric}
	if _, ok := r.samples[k]; !ok {
		r.order = append(r.order, k)
	}
	r.samples[k] = append(r.samples[k], v)
}

// get returns the median of a metric and whether it was measured.
func (r *results) get(scenario, library, metric string) (float64, bool) {
	s, ok := r.samples[key{scenario, library, metric}]
	if !ok || len(s) == 0 {
		return 0, false
	}
	return median(s), true
}

func (r *results) figures() []figure {
	var out []figure
	for _, k := range r.order {
		v, _ := r.get(k.scenario, k.library, k.metric)
		f := figure{Scenario: k.scenario, Library: k.library, Metric: k.metric, Value: round3(v), Unit: units[k.metric]}
		s := r.samples[k]
		f.Min, f.Max = s[0], s[0]
		for _, x := range s {
			f.Rounds = append(f.Rounds, round3(x))
			f.Min, f.Max = min(f.Min, x), max(f.Max, x)
		}
		f.Min, f.Max = round3(f.Min), round3(f.Max)
		out = append(out, f)
	}
	return out
}

func (r *results) writeJSON(path string) error {
	figs := r.figures()
	if figs == nil {
		figs = []figure{}
	}
	b, err := json.MarshalIndent(figs, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func round3(v float64) float64 {
	if math.Abs(v) >= 1000 {
		return math.Round(v)
	}
	return math.Round(v*1000) / 1000
}

func median(s []float64) float64 {
	c := append([]float64(nil), s...)
	sort.Float64s(c)
	n := len(c)
	if n%2 == 1 {
		return c[n/2]
	}
	return (c[n/2-1] + c[n/2]) / 2
}

// percentile returns the p-th percentile (0..100) of ds, nearest rank.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	c := append([]time.Duration(nil), ds...)
	sort.Slice(c, func(i, j int) bool { return c[i] < c[j] })
	i := int(math.Ceil(p/100*float64(len(c)))) - 1
	return c[max(0, min(i, len(c)-1))]
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func fmtNum(v float64) string {
	switch a := math.Abs(v); {
	case a == 0:
		return "0"
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.3f", v)
	}
}

// row is one line of a table: a metric of a scenario.
type row struct{ scenario, metric string }

// allRows is every scenario's metrics in the table's order.
func allRows() []row {
	var out []row
	for _, s := range scenarioNames() {
		for _, m := range metricOrder {
			out = append(out, row{s, m})
		}
	}
	return out
}

// printTable writes the rows that were measured as a markdown table: one
// column per library, and a reference column.
func (r *results) printTable(w io.Writer, libs []string, rows []row) {
	fmt.Fprintf(w, "| scenario | metric | unit | %s | reference |\n", strings.Join(libs, " | "))
	fmt.Fprintf(w, "|---|---|---|%s---|\n", strings.Repeat("---:|", len(libs)))
	for _, rw := range rows {
		s, m := rw.scenario, rw.metric
		var cells []string
		any := false
		for _, lib := range libs {
			if v, ok := r.get(s, lib, m); ok {
				cells = append(cells, fmtNum(v))
				any = true
			} else {
				cells = append(cells, "–")
			}
		}
		ref := ""
		for _, lib := range []string{refBenchmark, refAfterFunc, refPing, refSerialHandoff, refBareScripts} {
			if v, ok := r.get(s, lib, m); ok {
				ref = fmt.Sprintf("%s (%s)", fmtNum(v), lib)
				any = true
			}
		}
		if !any {
			continue
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", s, m, units[m], strings.Join(cells, " | "), ref)
	}
}

func (r *results) printMarkdown(w io.Writer, e *env) {
	fmt.Fprintf(w, "# holdfast benchmark\n\n%s.\n\n", r.settings)
	r.printTable(w, e.libs, allRows())
	fmt.Fprintln(w)
	fmt.Fprintln(w, "## Summary")
	fmt.Fprintln(w)
	r.printSummary(w, e)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "## Checks")
	fmt.Fprintln(w)
	for _, g := range r.goals() {
		fmt.Fprintf(w, "- %s\n", g)
	}
	if len(r.notes) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "## Notes")
		fmt.Fprintln(w)
		for _, n := range r.notes {
			fmt.Fprintf(w, "- %s\n", n)
		}
	}
}

// noteRatios notes, round by round, a reference's figure and holdfast's as
// multiples of the same round's figure of versus ("best peer": the best of
// the peers in that round). A target of holdfast ≥ k× versus is within reach
// of any client of holdfast's protocol in a round only if the reference, a
// floor of that protocol, is at k× or above.
func (e *env) noteRatios(scenario, metric, ref, versus string) {
	s := e.res.samples
	floor := s[key{scenario, ref, metric}]
	hf := s[key{scenario, libHoldfast, metric}]
	var parts []string
	for i := range floor {
		base := 0.0
		peers := []string{versus}
		if versus == vsBestPeer {
			peers = []string{libRedsync, libRedislock, libRueidislock}
		}
		for _, lib := range peers {
			if v := s[key{scenario, lib, metric}]; i < len(v) {
				base = max(base, v[i])
			}
		}
		if base == 0 {
			return
		}
		p := fmt.Sprintf("%s %.2f×", ref, floor[i]/base)
		if i < len(hf) {
			// holdfast as a share of the reference too: for the
			// uncontended cycle that is its share of the bare-call floor.
			p += fmt.Sprintf(", holdfast %.2f× (%.2f× %s)", hf[i]/base, hf[i]/floor[i], ref)
		}
		parts = append(parts, p)
	}
	if len(parts) > 0 {
		e.notef("%s: %s as multiples of the round's %s, round by round: %s", scenario, metric, versus, strings.Join(parts, "; "))
	}
}
