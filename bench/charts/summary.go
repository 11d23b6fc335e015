package charts

import (
	"fmt"
	"io"
	"strings"
)

// Row is one line of the summary: a figure of holdfast's and how it
// compares with each peer that has it.
type Row struct {
	Measure          string
	Scenario, Metric string
}

// SummaryRows are the summary table's lines, in order.
var SummaryRows = []Row{
	{"uncontended lock+release cycles/s", "uncontended", "cycles_per_s"},
	{"uncontended acquire p99 (µs)", "uncontended", "acquire_p99_us"},
	{"client CPU per cycle (µs)", "uncontended", "client_cpu_us_per_cycle"},
	{"Redis CPU per cycle (µs)", "uncontended", "redis_cpu_us_per_cycle"},
	{"allocations per cycle", "uncontended", "allocs_per_cycle"},
	{"hot lock handoffs/s", "hotlock", "handoffs_per_s"},
	{"hot lock handoff p99 (µs)", "hotlock", "handoff_p99_us"},
	{"hot lock handoff p99 (round trips)", "hotlock", "handoff_p99_rtt"},
	{"commands while 100 waiters wait 5 s", "waiting", "waiter_commands"},
	{"last of 100 waiters served after release (ms)", "waiting", "drain_ms"},
	{"renewal calls/s, 100,000 locks held", "renewal", "renewal_commands_per_s"},
	{"heap per quiet hold, 100,000 held (bytes)", "renewal", "heap_bytes_per_lock"},
	{"holds lost, 100,000 held", "renewal", "lost_holds"},
	{"holds per renewal call, 10,000 held, one server", "scale-10k", "holds_per_script_call"},
	{"heap per quiet hold, 10,000 held, one server (bytes)", "scale-10k", "heap_bytes_per_lock"},
	{"holds lost, 10,000 held, one server", "scale-10k", "lost_holds"},
	{"holds per renewal call, 10,000 held, cluster", "scale-cluster-10k", "holds_per_script_call"},
	{"holds lost, 10,000 held, cluster", "scale-cluster-10k", "lost_holds"},
	{"commands while 10,000 waiters wait 3 s", "scale-waiters", "waiter_commands"},
	{"heap per Client (bytes)", "clients", "heap_bytes_per_client"},
	{"leader handover p50 (µs)", "election", "handover_p50_us"},
	{"RedLock on 3 servers, cycles/s", "redlock", "cycles_per_s"},
}

// WriteSummary writes the summary as a markdown table: holdfast's median
// with its min–max over rounds, and against each peer holdfast's figure as
// a multiple of the peer's, with the least and greatest multiple of one
// round to the same round. Rows holdfast has no figure for are left out.
func WriteSummary(w io.Writer, s *Set, rows []Row) error {
	var b strings.Builder
	b.WriteString("| measure | holdfast (min–max) |")
	for _, p := range Peers {
		fmt.Fprintf(&b, " vs %s |", p)
	}
	b.WriteString("\n|---|---:|")
	b.WriteString(strings.Repeat("---:|", len(Peers)))
	b.WriteString("\n")
	for _, r := range rows {
		hf, ok := s.Get(r.Scenario, Holdfast, r.Metric)
		if !ok {
			continue
		}
		fmt.Fprintf(&b, "| %s | %s |", r.Measure, withSpread(hf))
		for _, p := range Peers {
			b.WriteString(" " + ratioCell(s, r, p) + " |")
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func withSpread(f Figure) string {
	if len(f.Rounds) < 2 || f.Min == f.Max {
		return number(f.Value)
	}
	return fmt.Sprintf("%s (%s–%s)", number(f.Value), number(f.Min), number(f.Max))
}

// ratioCell is "1.27× (1.20–1.31)"; "0 vs N" when holdfast's figure is
// zero, "peer N" when the peer's is, "–" when the peer was not measured.
func ratioCell(s *Set, r Row, peer string) string {
	pf, ok := s.Get(r.Scenario, peer, r.Metric)
	if !ok {
		return "–"
	}
	if hf, _ := s.Get(r.Scenario, Holdfast, r.Metric); hf.Value == 0 {
		return fmt.Sprintf("0 vs %s", number(pf.Value))
	}
	q, ok := s.RatioTo(r.Scenario, r.Metric, peer)
	if !ok {
		return fmt.Sprintf("peer %s", number(pf.Value))
	}
	if q.Rounds < 2 || q.Min == q.Max {
		return ratio(q.Median)
	}
	return fmt.Sprintf("%s (%s–%s)", ratio(q.Median), ratioNum(q.Min), ratioNum(q.Max))
}

func ratio(v float64) string {
	if v < 0.1 {
		return ratioNum(v)
	}
	return ratioNum(v) + "×"
}

// ratioNum writes a ratio with two decimals, or below 0.1 as a fraction
// "1/N", easier to read than a run of zeros.
func ratioNum(v float64) string {
	if v < 0.1 && v > 0 {
		return "1/" + number(1/v)
	}
	return fmt.Sprintf("%.2f", v)
}
