// Package charts draws the benchmark's figures as SVG charts and writes
// its summary table, both from the JSON that `go run . -json FILE` writes,
// so that every run of the bench can redraw the report's pictures.
package charts

import (
	"encoding/json"
	"fmt"
	"os"
)

// Library names as the bench writes them, in the order charts show them.
const (
	Holdfast    = "holdfast"
	Rueidislock = "rueidislock"
	Redsync     = "redsync"
	Redislock   = "redislock"
)

// Peers are the libraries holdfast is compared with.
var Peers = []string{Rueidislock, Redsync, Redislock}

// Libraries are holdfast and its peers.
var Libraries = append([]string{Holdfast}, Peers...)

// Figure is one reported number: the median of its rounds, and the rounds.
type Figure struct {
	Scenario string    `json:"scenario"`
	Library  string    `json:"library"`
	Metric   string    `json:"metric"`
	Value    float64   `json:"value"`
	Unit     string    `json:"unit"`
	Rounds   []float64 `json:"rounds,omitempty"`
	Min      float64   `json:"min"`
	Max      float64   `json:"max"`
}

// Set is a run's figures, looked up by scenario, library and metric.
type Set struct {
	byKey map[[3]string]Figure
}

// NewSet indexes figs. A figure without rounds (a file written before the
// bench gave them) counts as one round of its value.
func NewSet(figs []Figure) *Set {
	s := &Set{byKey: make(map[[3]string]Figure, len(figs))}
	for _, f := range figs {
		if len(f.Rounds) == 0 {
			f.Rounds = []float64{f.Value}
			f.Min, f.Max = f.Value, f.Value
		}
		s.byKey[[3]string{f.Scenario, f.Library, f.Metric}] = f
	}
	return s
}

// Load reads a file written by the bench's -json flag.
func Load(path string) (*Set, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var figs []Figure
	if err := json.Unmarshal(b, &figs); err != nil {
		return nil, fmt.Errorf("charts: %s: %w", path, err)
	}
	if len(figs) == 0 {
		return nil, fmt.Errorf("charts: %s holds no figures", path)
	}
	return NewSet(figs), nil
}

// Get returns a figure and whether the run measured it.
func (s *Set) Get(scenario, library, metric string) (Figure, bool) {
	f, ok := s.byKey[[3]string{scenario, library, metric}]
	return f, ok
}

// Ratio is holdfast's figure over a peer's: the ratio of the medians, and
// the least and greatest ratio of one round to the same round (the rounds
// are interleaved, so round i of each library ran side by side).
type Ratio struct {
	Median, Min, Max float64
	Rounds           int
}

// RatioTo returns holdfast's figure over library's, and whether both were
// measured (and the peer's is not zero).
func (s *Set) RatioTo(scenario, metric, library string) (Ratio, bool) {
	hf, ok1 := s.Get(scenario, Holdfast, metric)
	peer, ok2 := s.Get(scenario, library, metric)
	if !ok1 || !ok2 || peer.Value == 0 {
		return Ratio{}, false
	}
	r := Ratio{Median: hf.Value / peer.Value}
	r.Min, r.Max = r.Median, r.Median
	n := min(len(hf.Rounds), len(peer.Rounds))
	first := true
	for i := range n {
		if peer.Rounds[i] == 0 {
			continue
		}
		v := hf.Rounds[i] / peer.Rounds[i]
		if first {
			r.Min, r.Max, first = v, v, false
		}
		r.Min, r.Max = min(r.Min, v), max(r.Max, v)
		r.Rounds++
	}
	return r, true
}
