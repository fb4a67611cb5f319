package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// results collects the values of each benchmark's metrics, per build, in
// the order the benchmarks and their metrics first appear.
type results struct {
	names  []string
	units  map[string][]string             // benchmark: its metrics' units
	values map[string]map[string][]float64 // label + benchmark + unit: values
}

func newResults() *results {
	return &results{units: map[string][]string{}, values: map[string]map[string][]float64{}}
}

// add records the result lines of one run of build label's binary and
// returns how many it found. A result line is the benchmark's name, its
// iterations, then value and unit pairs (testing.B's output format).
func (r *results) add(label, output string) int {
	n := 0
	for line := range strings.Lines(output) {
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || len(f)%2 != 0 {
			continue
		}
		if _, err := strconv.ParseInt(f[1], 10, 64); err != nil {
			continue
		}
		name := f[0]
		if !slices.Contains(r.names, name) {
			r.names = append(r.names, name)
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			unit := f[i+1]
			if !slices.Contains(r.units[name], unit) {
				r.units[name] = append(r.units[name], unit)
			}
			key := label + "\x00" + name
			if r.values[key] == nil {
				r.values[key] = map[string][]float64{}
			}
			r.values[key][unit] = append(r.values[key][unit], v)
		}
		n++
	}
	return n
}

// table is a Markdown table of each benchmark's metrics: the median of
// each build's runs, new over old, and each build's range.
func (r *results) table(old, cur string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n| benchmark | metric | %s (median) | %s (median) | %s / %s | %s range | %s range |\n|---|---|---|---|---|---|---|\n",
		old, cur, cur, old, old, cur)
	for _, name := range r.names {
		for _, unit := range r.units[name] {
			o, c := r.values[old+"\x00"+name][unit], r.values[cur+"\x00"+name][unit]
			if len(o) == 0 || len(c) == 0 {
				continue
			}
			mo, mc := median(o), median(c)
			ratio := "–"
			if mo != 0 {
				ratio = fmt.Sprintf("%.2f×", mc/mo)
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", name, unit, num(mo), num(mc), ratio, span(o), span(c))
		}
	}
	return b.String()
}

// median of vs (not empty): the middle value, or the mean of the two
// middle ones.
func median(vs []float64) float64 {
	s := slices.Sorted(slices.Values(vs))
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}

func span(vs []float64) string {
	return num(slices.Min(vs)) + "–" + num(slices.Max(vs))
}

// num prints v with the precision its size calls for.
func num(v float64) string {
	switch a := max(v, -v); {
	case a >= 1000:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}
