package holdfast

import (
	"slices"
	"testing"
	"time"
)

func TestGlobalOrder(t *testing.T) {
	a, b := &Client{cfg: Config{ClientID: "a"}}, &Client{cfg: Config{ClientID: "b"}}
	for _, tc := range []struct {
		name    string
		targets []Target
		want    []int
	}{
		{"sorted already", []Target{{a, "x"}, {a, "y"}}, []int{0, 1}},
		{"reversed", []Target{{a, "y"}, {a, "x"}}, []int{1, 0}},
		{"name before client", []Target{{a, "y"}, {b, "x"}}, []int{1, 0}},
		{"equal names by ClientID", []Target{{b, "x"}, {a, "x"}}, []int{1, 0}},
		{"three crossing", []Target{{b, "z"}, {a, "x"}, {b, "y"}}, []int{1, 2, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := globalOrder(tc.targets); !slices.Equal(got, tc.want) {
				t.Fatalf("globalOrder = %v, want %v", got, tc.want)
			}
		})
	}
	// Any permutation of the same targets gives the same sequence of targets.
	ts := []Target{{b, "z"}, {a, "x"}, {b, "y"}, {a, "y"}}
	var first []Target
	for _, perm := range [][]int{{0, 1, 2, 3}, {3, 2, 1, 0}, {2, 0, 3, 1}} {
		in := make([]Target, len(perm))
		for i, j := range perm {
			in[i] = ts[j]
		}
		var out []Target
		for _, j := range globalOrder(in) {
			out = append(out, in[j])
		}
		if first == nil {
			first = out
		} else if !slices.Equal(out, first) {
			t.Fatalf("order depends on the caller's order: %v vs %v", out, first)
		}
	}
}

func TestQuorum(t *testing.T) {
	for n, want := range map[int]int{1: 1, 2: 2, 3: 2, 4: 3, 5: 3, 7: 4} {
		if got := quorum(n); got != want {
			t.Errorf("quorum(%d) = %d, want %d", n, got, want)
		}
	}
}

func TestQuorumDeadline(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms ...int) []time.Time {
		out := make([]time.Time, len(ms))
		for i, m := range ms {
			out[i] = t0.Add(time.Duration(m) * time.Millisecond)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		d    []time.Time
		q    int
		want time.Time
	}{
		{"all three, majority two", at(300, 100, 200), 2, t0.Add(200 * time.Millisecond)},
		{"exactly the majority", at(300, 100), 2, t0.Add(100 * time.Millisecond)},
		{"fewer than the majority", at(300), 2, time.Time{}},
		{"five nodes", at(5, 1, 4, 2, 3), 3, t0.Add(3 * time.Millisecond)},
		{"single node", at(7), 1, t0.Add(7 * time.Millisecond)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := quorumDeadline(tc.d, tc.q); !got.Equal(tc.want) {
				t.Fatalf("quorumDeadline = %v, want %v", got, tc.want)
			}
		})
	}
	// Never earlier than Redlock's validity from the first send when every
	// part's deadline counts from its own (later) send.
	lease := time.Second
	first := t0
	sends := []time.Time{t0, t0.Add(3 * time.Millisecond), t0.Add(9 * time.Millisecond)}
	var ds []time.Time
	for _, s := range sends {
		ds = append(ds, redlockValidity(s, lease))
	}
	if got, floor := quorumDeadline(ds, 2), redlockValidity(first, lease); got.Before(floor) {
		t.Fatalf("quorum deadline %v before Redlock's validity %v", got, floor)
	}
	if want := t0.Add(lease - (lease/100 + 2*time.Millisecond)); !redlockValidity(first, lease).Equal(want) {
		t.Fatalf("redlockValidity = %v, want %v", redlockValidity(first, lease), want)
	}
}

func TestEarliest(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	if got := earliest(nil); !got.IsZero() {
		t.Fatalf("earliest(nil) = %v", got)
	}
	if got := earliest([]time.Time{t0.Add(2), t0, t0.Add(1)}); !got.Equal(t0) {
		t.Fatalf("earliest = %v, want %v", got, t0)
	}
}

func TestFenceFloorAndFirstRefused(t *testing.T) {
	for _, tc := range []struct {
		tokens []uint64
		want   uint64
	}{{nil, 0}, {[]uint64{3}, 3}, {[]uint64{2, 1001, 7}, 1001}} {
		if got := fenceFloor(tc.tokens); got != tc.want {
			t.Errorf("fenceFloor(%v) = %d, want %d", tc.tokens, got, tc.want)
		}
	}
	for _, tc := range []struct {
		granted []bool
		want    int
	}{{[]bool{true, true}, -1}, {[]bool{true, false, true}, 1}, {[]bool{false, false}, 0}, {nil, -1}} {
		if got := firstRefused(tc.granted); got != tc.want {
			t.Errorf("firstRefused(%v) = %d, want %d", tc.granted, got, tc.want)
		}
	}
}
