package actor

import (
	"fmt"
	"testing"

	"pgregory.net/rapid"
)

// checkRegistry fails t unless r holds exactly the entries of want, each
// reachable from its home slot with its hash's tag beside it, in a table of
// a valid size and load.
func checkRegistry(t interface {
	Helper()
	Fatalf(string, ...any)
}, r *registry, want map[string]*entry) {
	t.Helper()
	if r.len() != len(want) {
		t.Fatalf("len %d, want %d", r.len(), len(want))
	}
	size := len(r.slots)
	if len(r.tags) != size {
		t.Fatalf("%d tags for %d slots", len(r.tags), size)
	}
	if size != 0 && (size < minRegistry || size&(size-1) != 0) {
		t.Fatalf("table of %d slots", size)
	}
	if r.n*16 > size*13 {
		t.Fatalf("%d entries in %d slots: over 13/16", r.n, size)
	}
	if size > minRegistry && r.n*8 < size {
		t.Fatalf("%d entries in %d slots: under 1/8", r.n, size)
	}
	seen := 0
	for i, e := range r.slots {
		if e == nil {
			continue
		}
		seen++
		if want[e.name] != e {
			t.Fatalf("slot %d holds %q, not in the reference", i, e.name)
		}
		if tag := tagOf(r.hashOf(e.name)); r.tags[i] != tag {
			t.Fatalf("slot %d holds %q with tag %#x, want %#x", i, e.name, r.tags[i], tag)
		}
		// Every slot from e's home up to i is full.
		mask := size - 1
		for j := int(r.hashOf(e.name)) & mask; j != i; j = (j + 1) & mask {
			if r.slots[j] == nil {
				t.Fatalf("%q at slot %d is cut off from its home by the empty slot %d", e.name, i, j)
			}
		}
	}
	if seen != len(want) {
		t.Fatalf("%d full slots, want %d", seen, len(want))
	}
	for name, e := range want {
		if got := r.get(name); got != e {
			t.Fatalf("get(%q) = %p, want %p", name, got, e)
		}
	}
	yielded := map[*entry]bool{}
	for e := range r.all() {
		if yielded[e] || want[e.name] != e {
			t.Fatalf("all yielded %q twice or wrongly", e.name)
		}
		yielded[e] = true
	}
	if len(yielded) != len(want) {
		t.Fatalf("all yielded %d entries, want %d", len(yielded), len(want))
	}
}

// TestRegistryRandom runs random puts, gets and removals against a Go map,
// with the real hash or with one of few values (long runs of collisions
// that wrap around the end of the table).
func TestRegistryRandom(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		var r registry
		if buckets := rapid.IntRange(0, 4).Draw(rt, "hashBuckets"); buckets > 0 {
			// Homes at the end of the table, so runs wrap around.
			r.hash = func(name string) uint64 {
				var h uint64
				for _, c := range []byte(name) {
					h = h*31 + uint64(c)
				}
				return ^(h % uint64(buckets))
			}
		}
		want := map[string]*entry{}
		names := rapid.IntRange(1, 300).Draw(rt, "names")
		name := rapid.Custom(func(t *rapid.T) string {
			return fmt.Sprint("lock:", rapid.IntRange(0, names-1).Draw(t, "name"))
		})
		steps := rapid.IntRange(1, 2000).Draw(rt, "steps")
		for range steps {
			n := name.Draw(rt, "op name")
			switch op := rapid.IntRange(0, 3).Draw(rt, "op"); op {
			case 0, 1: // put if absent, as Enqueue does
				if r.get(n) != want[n] {
					rt.Fatalf("get(%q) before put", n)
				}
				if want[n] == nil {
					e := &entry{name: n}
					r.put(e)
					want[n] = e
				}
			case 2: // remove the entry
				e := want[n]
				if e == nil {
					e = &entry{name: n}
				}
				if got := r.remove(e); got != (want[n] != nil) {
					rt.Fatalf("remove(%q) = %v", n, got)
				}
				delete(want, n)
			case 3: // remove an entry of that name that is not the table's
				if r.remove(&entry{name: n}) {
					rt.Fatalf("removed a stranger named %q", n)
				}
			}
			checkRegistry(rt, &r, want)
		}
	})
}

// TestRegistryGrowShrink fills a table with 100,000 names and empties it:
// it doubles past 13/16 full and halves under 1/8, back to its floor.
func TestRegistryGrowShrink(t *testing.T) {
	const n = 100_000
	var r registry
	es := make([]*entry, n)
	want := map[string]*entry{}
	for i := range es {
		es[i] = &entry{name: fmt.Sprint("lock:", i)}
		r.put(es[i])
		want[es[i].name] = es[i]
		size := minRegistry
		for (i+1)*16 > size*13 {
			size *= 2
		}
		if len(r.slots) != size {
			t.Fatalf("%d entries in %d slots, want %d", i+1, len(r.slots), size)
		}
	}
	checkRegistry(t, &r, want)
	if len(r.slots) != 1<<17 {
		t.Fatalf("100,000 entries in %d slots", len(r.slots))
	}
	for i, e := range es {
		if !r.remove(e) {
			t.Fatalf("remove(%q) failed", e.name)
		}
		delete(want, e.name)
		if i%10_000 == 0 {
			checkRegistry(t, &r, want)
		}
		left := n - i - 1
		if left > 0 && left*8 < len(r.slots)/2 && len(r.slots) > minRegistry {
			t.Fatalf("%d entries left in %d slots", left, len(r.slots))
		}
	}
	checkRegistry(t, &r, want)
	if len(r.slots) != minRegistry {
		t.Fatalf("empty table of %d slots, want %d", len(r.slots), minRegistry)
	}
}

// TestRegistryWrapAround removes entries from runs that wrap around the
// end of the table, with the homes forced.
func TestRegistryWrapAround(t *testing.T) {
	homes := map[string]uint64{}
	newTable := func() *registry {
		return &registry{hash: func(name string) uint64 { return homes[name] }}
	}
	slotNames := func(r *registry) []string {
		s := make([]string, len(r.slots))
		for i, e := range r.slots {
			if e != nil {
				s[i] = e.name
			}
		}
		return s
	}
	put := func(r *registry, name string, home uint64) *entry {
		homes[name] = home
		e := &entry{name: name}
		r.put(e)
		return e
	}

	// Each case puts three names at forced homes in an 8-slot table and
	// removes the first, with the slots before and after.
	type named struct {
		name string
		home uint64
	}
	var r *registry
	for _, tc := range []struct {
		what          string
		puts          [3]named
		before, after string
	}{
		// All home at slot 7 and fill 7, 0 and 1: removing a moves b and
		// c back across the end.
		{"a run across the end", [3]named{{"a", 7}, {"b", 7}, {"c", 7}}, "[b c      a]", "[c       b]"},
		// e is home at 0, f (home 7) sits at 1: removing d leaves e and
		// moves f to 7, past e.
		{"an entry at home in the run", [3]named{{"d", 7}, {"e", 0}, {"f", 7}}, "[e f      d]", "[e       f]"},
		// i (home 6) wrapped to 0: removing g moves i to 6 and leaves h
		// home.
		{"a run ending at the end", [3]named{{"g", 6}, {"h", 7}, {"i", 6}}, "[i      g h]", "[      i h]"},
	} {
		r = newTable()
		first := put(r, tc.puts[0].name, tc.puts[0].home)
		for _, p := range tc.puts[1:] {
			put(r, p.name, p.home)
		}
		if got := fmt.Sprint(slotNames(r)); got != tc.before {
			t.Fatalf("%s: slots %s, want %s", tc.what, got, tc.before)
		}
		r.remove(first)
		if got := fmt.Sprint(slotNames(r)); got != tc.after {
			t.Fatalf("%s: after removing %s: slots %s, want %s", tc.what, first.name, got, tc.after)
		}
	}
	// The last case's survivors are still found, its removed one not.
	for _, name := range []string{"h", "i"} {
		if r.get(name) == nil || r.get(name).name != name {
			t.Fatalf("get(%q) lost it", name)
		}
	}
	if r.get("g") != nil {
		t.Fatal("g still found")
	}
}

// TestRegistryIterationGuard: changing the table during all panics.
func TestRegistryIterationGuard(t *testing.T) {
	var r registry
	r.put(&entry{name: "a"})
	r.put(&entry{name: "b"})
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	for e := range r.all() {
		r.remove(e)
	}
}

// BenchmarkRegistryLookup: a lookup of a name held (hit) and of a new name
// (miss, as Enqueue's for a name with no actor), among n entries, against
// a map[string]*entry of the same names.
func BenchmarkRegistryLookup(b *testing.B) {
	for _, n := range []int{64, 100_000, 106_000} {
		var r registry
		m := make(map[string]*entry)
		names := make([]string, n)
		misses := make([]string, n)
		for i := range n {
			names[i] = fmt.Sprintf("bench-%d", i)
			misses[i] = fmt.Sprintf("other-%d", i)
			e := &entry{name: names[i]}
			r.put(e)
			m[names[i]] = e
		}
		for _, tc := range []struct {
			what string
			keys []string
		}{{"hit", names}, {"miss", misses}} {
			b.Run(fmt.Sprintf("%s/%d/registry", tc.what, n), func(b *testing.B) {
				for i := 0; b.Loop(); i++ {
					r.get(tc.keys[i%n])
				}
			})
			b.Run(fmt.Sprintf("%s/%d/map", tc.what, n), func(b *testing.B) {
				for i := 0; b.Loop(); i++ {
					_ = m[tc.keys[i%n]]
				}
			})
		}
	}
}
