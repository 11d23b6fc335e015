package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseRedisCPU(t *testing.T) {
	info := "# CPU\r\nused_cpu_sys:1.250000\r\nused_cpu_user:2.500001\r\nused_cpu_sys_children:9.000000\r\n"
	got, ok := parseRedisCPU(info)
	if !ok || got != 3750001*time.Microsecond {
		t.Fatalf("parseRedisCPU = %v, %v; want 3.750001s, true", got, ok)
	}
	if _, ok := parseRedisCPU("used_cpu_sys:1.0\r\n"); ok {
		t.Fatal("parseRedisCPU accepted an INFO without used_cpu_user")
	}
	if _, ok := parseRedisCPU("used_cpu_sys:x\r\nused_cpu_user:1\r\n"); ok {
		t.Fatal("parseRedisCPU accepted a value that is not a number")
	}
}

func testEnv() *env {
	e := &env{libs: []string{libHoldfast, libRueidislock}, res: newResults(), info: runInfo{commit: "abc1234", command: "go run . -quick"}}
	e.res.add("uncontended", libHoldfast, "cycles_per_s", 30000)
	e.res.add("uncontended", libRueidislock, "cycles_per_s", 20000)
	e.res.add("uncontended", libHoldfast, "allocs_per_cycle", 20)
	return e
}

func TestTargets(t *testing.T) {
	var b strings.Builder
	testEnv().res.printTargets(&b)
	out := b.String()
	for _, want := range []string{
		"| uncontended cycles/s vs rueidislock | ≥ 1.2× | 30000 | rueidislock 20000 | 1.50× | yes |",
		"| allocations per cycle | ≤ 16 | 20.0 |  | 20.0 | **no** |",
		"| heap per Client | ≤ 100 KiB | – | | not measured (clients heap_bytes_per_client) | |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("targets table lacks %q:\n%s", want, out)
		}
	}
}

func TestWriteMarkdownSection(t *testing.T) {
	e := testEnv()
	dir := t.TempDir()

	fresh := filepath.Join(dir, "new.md")
	if err := e.res.writeMarkdownSection(fresh, e); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(fresh)
	if !strings.HasPrefix(string(b), mdBegin) || !strings.Contains(string(b), "| uncontended | cycles_per_s | 1/s | 30000 | 20000 |") {
		t.Fatalf("new file:\n%s", b)
	}

	doc := filepath.Join(dir, "doc.md")
	os.WriteFile(doc, []byte("# Title\n\nbefore\n\n"+mdBegin+"\nold figures\n"+mdEnd+"\n\nafter\n"), 0o644)
	if err := e.res.writeMarkdownSection(doc, e); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(doc)
	s := string(b)
	if strings.Contains(s, "old figures") || !strings.HasPrefix(s, "# Title\n\nbefore\n\n"+mdBegin) || !strings.HasSuffix(s, mdEnd+"\n\nafter\n") ||
		!strings.Contains(s, "commit `abc1234`") {
		t.Fatalf("replaced section:\n%s", s)
	}

	plain := filepath.Join(dir, "plain.md")
	os.WriteFile(plain, []byte("no markers\n"), 0o644)
	if err := checkMarkdownTarget(plain); err == nil {
		t.Fatal("checkMarkdownTarget accepted a file without markers")
	}
	if err := e.res.writeMarkdownSection(plain, e); err == nil {
		t.Fatal("writeMarkdownSection overwrote a file without markers")
	}
	if b, _ := os.ReadFile(plain); string(b) != "no markers\n" {
		t.Fatalf("file without markers changed: %q", b)
	}
}

func TestNoteRatiosRoundByRound(t *testing.T) {
	e := &env{res: newResults()}
	for _, r := range []struct{ floor, hf, redislock, rueidislock float64 }{
		{6000, 5000, 1000, 3000},
		{9000, 4000, 3000, 2000},
	} {
		e.res.add("hotlock", refSerialHandoff, "handoffs_per_s", r.floor)
		e.res.add("hotlock", libHoldfast, "handoffs_per_s", r.hf)
		e.res.add("hotlock", libRedislock, "handoffs_per_s", r.redislock)
		e.res.add("hotlock", libRueidislock, "handoffs_per_s", r.rueidislock)
	}
	e.noteRatios("hotlock", "handoffs_per_s", refSerialHandoff, vsBestPeer)
	e.noteRatios("hotlock", "handoffs_per_s", refSerialHandoff, libRueidislock)
	want := []string{
		// Round 1's best peer is rueidislock (3000), round 2's redislock
		// (3000); holdfast is 5000/6000 and 4000/9000 of the reference.
		"hotlock: handoffs_per_s as multiples of the round's best peer, round by round: handoff.lua serially 2.00×, holdfast 1.67× (0.83× handoff.lua serially); handoff.lua serially 3.00×, holdfast 1.33× (0.44× handoff.lua serially)",
		"hotlock: handoffs_per_s as multiples of the round's rueidislock, round by round: handoff.lua serially 2.00×, holdfast 1.67× (0.83× handoff.lua serially); handoff.lua serially 4.50×, holdfast 2.00× (0.44× handoff.lua serially)",
	}
	if len(e.res.notes) != len(want) {
		t.Fatalf("notes = %q, want %q", e.res.notes, want)
	}
	for i := range want {
		if e.res.notes[i] != want[i] {
			t.Errorf("note %d = %q\nwant      %q", i, e.res.notes[i], want[i])
		}
	}
}
