// Package catalog describes the backends registered on a jobq.URLMux, for
// `jobq backends` and the generated parts of the documentation.
package catalog

import (
	"fmt"
	"io"
	"reflect"
	"strings"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
)

// Backend describes one registered backend for the capability matrix.
type Backend struct {
	// Schemes are the URL schemes that open the backend, the first being its
	// main one.
	Schemes      []string
	Capabilities driver.Capabilities
}

// Backends lists the backends registered on mux, grouping schemes that share an
// opener (postgres and postgresql, say), in scheme order.
func Backends(mux *jobq.URLMux) []Backend {
	var out []Backend
	var openers []driver.Opener
	for _, s := range mux.Schemes() {
		o, _ := mux.Opener(s)
		found := false
		for i, prev := range openers {
			if sameOpener(prev, o) {
				out[i].Schemes = append(out[i].Schemes, s)
				found = true
				break
			}
		}
		if !found {
			openers = append(openers, o)
			out = append(out, Backend{Schemes: []string{s}, Capabilities: o.Capabilities()})
		}
	}
	return out
}

func sameOpener(a, b driver.Opener) bool {
	ta, tb := reflect.TypeOf(a), reflect.TypeOf(b)
	return ta == tb && ta.Comparable() && a == b
}

// WriteCapabilityMatrix writes mux's backends' declared features
// and limits as a Markdown table: one row per feature, one column per
// backend. The README's matrix and `jobq backends` both come from here.
func WriteCapabilityMatrix(w io.Writer, mux *jobq.URLMux) error {
	bs := Backends(mux)
	var b strings.Builder
	b.WriteString("| feature |")
	for _, bi := range bs {
		fmt.Fprintf(&b, " %s |", strings.Join(bi.Schemes, ", "))
	}
	b.WriteString("\n|---|")
	for range bs {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, f := range driver.AllFeatures {
		fmt.Fprintf(&b, "| %s |", f)
		for _, bi := range bs {
			fmt.Fprintf(&b, " %s |", bi.Capabilities.Level(f))
		}
		b.WriteString("\n")
	}
	limit := func(name string, get func(driver.Capabilities) string) {
		fmt.Fprintf(&b, "| %s |", name)
		for _, bi := range bs {
			fmt.Fprintf(&b, " %s |", get(bi.Capabilities))
		}
		b.WriteString("\n")
	}
	limit("max message size", func(c driver.Capabilities) string { return byteSize(c.MaxMessageBytes) })
	limit("max visibility", func(c driver.Capabilities) string {
		if c.MaxVisibility == 0 {
			return "no limit"
		}
		return humanDuration(c.MaxVisibility)
	})
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteFallbacks writes, per backend of mux, what happens instead for every feature
// that is not native, as a Markdown list.
func WriteFallbacks(w io.Writer, mux *jobq.URLMux) error {
	var b strings.Builder
	for _, bi := range Backends(mux) {
		var lines []string
		for _, f := range driver.AllFeatures {
			s := bi.Capabilities.Features[f]
			if s.Level == driver.Native {
				continue
			}
			instead := s.Fallback
			if instead == "" {
				if fb, ok := driver.PortableFallback(f); ok {
					instead = fb
				} else {
					instead = "calls fail with Unimplemented"
				}
			}
			lines = append(lines, fmt.Sprintf("  - %s (%s): %s", f, s.Level, instead))
		}
		if len(lines) == 0 {
			continue
		}
		fmt.Fprintf(&b, "- **%s**\n%s\n", bi.Schemes[0], strings.Join(lines, "\n"))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func humanDuration(d time.Duration) string {
	const day = 24 * time.Hour
	if d >= day && d%day == 0 {
		return fmt.Sprintf("%d days", d/day)
	}
	return d.String()
}

func byteSize(n int) string {
	switch {
	case n == 0:
		return "no limit"
	case n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}
