package main

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestResultsAddParsesBenchmarkLines(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		output string
		want   int
	}{
		{"custom metrics and benchmem", "BenchmarkEndToEnd-2   \t   20000\t     49846 ns/op\t        36.29 client-µs/task\t     20099 tasks/s\t    8031 B/op\t      64 allocs/op\n", 1},
		{"sub-benchmarks", "BenchmarkEndToEnd/consumers=1/receive=1-2 \t 20000\t 183310 ns/op\t 187.9 cpu-µs/task\nBenchmarkEndToEnd/consumers=4/receive=1-2 \t 20000\t 83236 ns/op\t 82.41 cpu-µs/task\n", 2},
		{"headers, PASS and logs", "goos: linux\ngoarch: amd64\npkg: x\ncpu: AMD EPYC\nBenchmarkX\n    bench_test.go:12: a log line\nPASS\n", 0},
		{"a name without a count", "BenchmarkEndToEnd-2 fast 1 ns/op\n", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := newResults().add("old", tt.output); got != tt.want {
				t.Fatalf("add found %d results; want %d", got, tt.want)
			}
		})
	}
}

func TestResultsTableGivesMediansRatioAndRange(t *testing.T) {
	t.Parallel()
	r := newResults()
	for _, run := range []struct {
		label string
		rate  string
	}{{"old", "20000"}, {"new", "15000"}, {"new", "17000"}, {"old", "22000"}, {"old", "30000"}, {"new", "16000"}} {
		r.add(run.label, "BenchmarkEndToEnd-2 \t 20000\t 50000 ns/op\t "+run.rate+" tasks/s\n")
	}
	got := r.table("old", "new")
	// Rounds: old 20000 and 22000 against new 15000 and 17000 (0.76×),
	// then old 30000 against new 16000, the round's only pair (a run short).
	want := "| BenchmarkEndToEnd-2 | tasks/s | 22000 | 16000 | 0.73× | 0.76–0.76× | 20000–30000 | 15000–17000 |"
	if !strings.Contains(got, want) {
		t.Fatalf("table:\n%s\nwant a row\n%s", got, want)
	}
}

func TestMedian(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   []float64
		want float64
	}{
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
	}
	for _, tt := range tests {
		if got := median(tt.in); got != tt.want {
			t.Errorf("median(%v) = %v; want %v", tt.in, got, tt.want)
		}
	}
}

func TestRoundRatios(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		o, c []float64
		want []float64
	}{
		{"two rounds", []float64{10, 30, 20, 20}, []float64{10, 10, 40, 40}, []float64{0.5, 2}},
		{"an unfinished round is left out", []float64{10, 10, 10}, []float64{5, 5, 5}, []float64{0.5}},
		{"a zero round is left out", []float64{0, 0}, []float64{1, 1}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := roundRatios(tt.o, tt.c); !slices.Equal(got, tt.want) {
				t.Fatalf("roundRatios = %v; want %v", got, tt.want)
			}
		})
	}
}

func TestRatioTableComparesTwoBenchmarksRunByRun(t *testing.T) {
	t.Parallel()
	r := newResults()
	for _, run := range []struct{ label, capped, plain string }{
		{"old", "7000", "10000"}, {"new", "8000", "10000"}, {"new", "9000", "10000"}, {"old", "6000", "10000"},
	} {
		r.add(run.label, "BenchmarkDrain/capped-2 \t 20000\t 1 ns/op\t "+run.capped+" tasks/s\n"+
			"BenchmarkDrain/plain-2 \t 20000\t 1 ns/op\t "+run.plain+" tasks/s\n")
	}
	got, err := r.ratioTable([]string{"old", "new"}, regexp.MustCompile("capped"), regexp.MustCompile("plain"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| old | tasks/s | 0.65× | 0.60–0.70× | 2 |", "| new | tasks/s | 0.85× | 0.80–0.90× | 2 |"} {
		if !strings.Contains(got, want) {
			t.Errorf("ratio table:\n%s\nwant a row\n%s", got, want)
		}
	}
	for _, pattern := range []string{"Drain", "missing"} {
		if _, err := r.ratioTable([]string{"old"}, regexp.MustCompile(pattern), regexp.MustCompile("plain")); err == nil {
			t.Errorf("ratioTable(%q, plain) succeeded; want an error (it must match exactly one benchmark)", pattern)
		}
	}
}

func TestParseRatio(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in       string
		top, bot string // "" for an error
	}{
		{"capped-2$:no-policies-2$", "capped-2$", "no-policies-2$"},
		{"a:b:c", "a", "b:c"},
		{"capped", "", ""},
		{":plain", "", ""},
		{"capped:", "", ""},
		{"a(:b", "", ""},
	}
	for _, tt := range tests {
		got, err := parseRatio(tt.in)
		if tt.top == "" {
			if err == nil {
				t.Errorf("parseRatio(%q) succeeded; want an error", tt.in)
			}
			continue
		}
		if err != nil || got[0].String() != tt.top || got[1].String() != tt.bot {
			t.Errorf("parseRatio(%q) = %v, %v; want %s and %s", tt.in, got, err, tt.top, tt.bot)
		}
	}
}
