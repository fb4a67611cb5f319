package main

import (
	"fmt"
	"regexp"
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
// each build's runs, new over old, the range of the rounds' own ratios
// (each round's new runs over its old runs), and each build's range. The
// rounds' ratios show how far one comparison can be trusted: the machine
// drifts between rounds, and both builds of a round drift alike.
func (r *results) table(old, cur string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n| benchmark | metric | %s (median) | %s (median) | %s / %s | rounds' ratios | %s range | %s range |\n|---|---|---|---|---|---|---|---|\n",
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
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", name, unit, num(mo), num(mc), ratio, ratioSpan(roundRatios(o, c)), span(o), span(c))
		}
	}
	return b.String()
}

// roundRatios divides, round by round, the mean of new's two runs (c) by
// the mean of old's two (o); a run appends one value to each, in order.
func roundRatios(o, c []float64) []float64 {
	var out []float64
	for i := 0; i+1 < min(len(o), len(c)); i += 2 {
		if d := o[i] + o[i+1]; d != 0 {
			out = append(out, (c[i]+c[i+1])/d)
		}
	}
	return out
}

// ratioTable is a Markdown table of numerator's metrics over
// denominator's, run by run, for each build: the median of the runs'
// ratios and their range. It compares two benchmarks of one build (a
// capped drain against an uncapped one), which run one after the other in
// one process, without the drift between separate runs.
func (r *results) ratioTable(labels []string, numerator, denominator *regexp.Regexp) (string, error) {
	top, err := r.match(numerator)
	if err != nil {
		return "", err
	}
	bottom, err := r.match(denominator)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n%s over %s, run by run:\n\n| build | metric | median | range | runs |\n|---|---|---|---|---|\n", top, bottom)
	for _, label := range labels {
		for _, unit := range r.units[top] {
			n, d := r.values[label+"\x00"+top][unit], r.values[label+"\x00"+bottom][unit]
			var rs []float64
			for i := range min(len(n), len(d)) {
				if d[i] != 0 {
					rs = append(rs, n[i]/d[i])
				}
			}
			if len(rs) == 0 {
				continue
			}
			fmt.Fprintf(&b, "| %s | %s | %.2f× | %s | %d |\n", label, unit, median(rs), ratioSpan(rs), len(rs))
		}
	}
	return b.String(), nil
}

// match returns the one benchmark whose name re matches.
func (r *results) match(re *regexp.Regexp) (string, error) {
	var found []string
	for _, name := range r.names {
		if re.MatchString(name) {
			found = append(found, name)
		}
	}
	if len(found) != 1 {
		return "", fmt.Errorf("-ratio: %q matches %d of the benchmarks run (%s); it must match one", re, len(found), strings.Join(r.names, ", "))
	}
	return found[0], nil
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

// ratioSpan is the range of ratios rs ("–" for none).
func ratioSpan(rs []float64) string {
	if len(rs) == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f–%.2f×", slices.Min(rs), slices.Max(rs))
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
