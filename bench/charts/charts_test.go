package charts

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDrawWritesEveryChartWithItsSeries(t *testing.T) {
	s, err := Load("testdata/small.json")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files, err := Draw(s, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(charts) {
		t.Fatalf("wrote %d files, want %d", len(files), len(charts))
	}
	want := map[string][]string{
		"renewal-calls.svg":    {"holdfast", "rueidislock", "redsync", "one call per hold per second", "Redis Cluster, 3 masters"},
		"heap-per-hold.svg":    {"holdfast", "rueidislock", "redsync"},
		"waiting-commands.svg": {"holdfast", "rueidislock", "redsync", "redislock", "100 waiters on one lock"},
		"throughput.svg":       {"holdfast", "rueidislock", "redsync", "redislock", "handoffs/s", "12,500"},
	}
	for name, series := range want {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		svg := string(b)
		if !strings.HasPrefix(strings.TrimSpace(svg), "<?xml") || !strings.Contains(svg, "<svg") {
			t.Errorf("%s is not an SVG document", name)
		}
		for _, s := range series {
			if !strings.Contains(svg, s) {
				t.Errorf("%s lacks %q", name, s)
			}
		}
	}
}

func TestDrawRefusesARunWithoutTheFigures(t *testing.T) {
	s := NewSet([]Figure{{Scenario: "uncontended", Library: Holdfast, Metric: "cycles_per_s", Value: 1}})
	if _, err := Draw(s, t.TempDir()); err == nil {
		t.Fatal("Draw of a run without the scale figures: no error")
	}
}

func TestRatioSpreadIsRoundByRound(t *testing.T) {
	s, err := Load("testdata/small.json")
	if err != nil {
		t.Fatal(err)
	}
	// holdfast 12000, 13000, 12500 against 10000, 10000, 12500.
	r, ok := s.RatioTo("uncontended", "cycles_per_s", Rueidislock)
	if !ok {
		t.Fatal("no ratio")
	}
	if r.Median != 1.25 || r.Min != 1.0 || r.Max != 1.3 || r.Rounds != 3 {
		t.Fatalf("ratio %+v, want median 1.25, min 1, max 1.3 over 3 rounds", r)
	}
}

func TestSummaryTable(t *testing.T) {
	s, err := Load("testdata/small.json")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := WriteSummary(&b, s, SummaryRows); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, line := range []string{
		"| measure | holdfast (min–max) | vs rueidislock | vs redsync | vs redislock |",
		"| uncontended lock+release cycles/s | 12,500 (12,000–13,000) | 1.25× (1.00–1.30) | 2.45× (2.40–2.50) | 2.05× (2.00–2.13) |",
		"| commands while 10,000 waiters wait 3 s | 1,100 | 1/10.9 | – | – |",
		"| commands while 100 waiters wait 5 s | 5.00 (4.00–6.00) | 1/42.0 (1/50.0–1/36.7) | 1/6,200 (1/7,500–1/5,333) | 1/6,000 (1/7,250–1/5,167) |",
	} {
		if !strings.Contains(out, line+"\n") {
			t.Errorf("summary lacks line\n%s\nin\n%s", line, out)
		}
	}
	if strings.Contains(out, "allocations per cycle") {
		t.Error("summary has a row the run did not measure")
	}
}
