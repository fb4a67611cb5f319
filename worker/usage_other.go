//go:build !linux

package worker

import "time"

// usage is the CPU time and resident memory of this process and the
// processes it started; only Linux measures them (usage_linux.go).
type usage struct {
	at  time.Time
	cpu time.Duration
	rss int64
}

// readUsage returns zeros outside Linux: the registry then shows no CPU or
// memory use.
func readUsage() usage { return usage{at: time.Now()} }
