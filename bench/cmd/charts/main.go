// Command charts draws the benchmark report's charts as SVG files, and
// prints its summary table, from the JSON of a bench run:
//
//	cd bench
//	go run . -json /tmp/bench.json
//	go run ./cmd/charts -in /tmp/bench.json -out ../docs/bench -summary
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/holdfast/holdfast/bench/charts"
)

func main() {
	in := flag.String("in", "", "the JSON a bench run wrote with -json (required)")
	out := flag.String("out", "../docs/bench", "directory the SVG files are written to")
	summary := flag.Bool("summary", false, "also print the summary table (markdown) to stdout")
	flag.Parse()
	if *in == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: go run ./cmd/charts -in FILE [-out DIR] [-summary]")
		os.Exit(2)
	}
	s, err := charts.Load(*in)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	files, err := charts.Draw(s, *out)
	for _, f := range files {
		fmt.Fprintln(os.Stderr, "wrote", f)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if *summary {
		if err := charts.WriteSummary(os.Stdout, s, charts.SummaryRows); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}
