package driver

import (
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jobq/jobq/errcode"
)

// PauseState is one pause of a queue: what it stops, since when and who
// asked for it. It is stored as a PausePolicy.
type PauseState struct {
	// TaskKind, when set, limits the pause to tasks of that kind.
	TaskKind string
	// Key, when set, limits the pause to tasks whose concurrency or
	// rate-limit key it is.
	Key string
	// Since is when the pause was set (millisecond resolution).
	Since time.Time
	// By names who paused the queue, as user@host.
	By string
}

// maxPauseKeyLen bounds the stored key of a pause (scope and author).
const maxPauseKeyLen = 3 * MaxPolicyKeyLen

// Whole reports whether the pause stops every task of the queue.
func (s PauseState) Whole() bool { return s.TaskKind == "" && s.Key == "" }

// SameScope reports whether s and o stop the same tasks.
func (s PauseState) SameScope(o PauseState) bool { return s.TaskKind == o.TaskKind && s.Key == o.Key }

// Stops reports whether the pause stops a task of that kind and those
// policy keys.
func (s PauseState) Stops(kind, concurrencyKey, rateKey string) bool {
	switch {
	case s.Whole():
		return true
	case s.TaskKind != "" && s.TaskKind != kind:
		return false
	case s.Key != "" && s.Key != concurrencyKey && s.Key != rateKey:
		return false
	}
	return true
}

// Scope describes what the pause stops: "the whole queue", "kind K",
// "key K" or "kind K, key K".
func (s PauseState) Scope() string {
	switch {
	case s.Whole():
		return "the whole queue"
	case s.Key == "":
		return "kind " + s.TaskKind
	case s.TaskKind == "":
		return "key " + s.Key
	}
	return "kind " + s.TaskKind + ", key " + s.Key
}

// String describes the pause: "pause the whole queue since ... by ...".
func (s PauseState) String() string {
	by := s.By
	if by == "" {
		by = "unknown"
	}
	return "pause " + s.Scope() + " since " + s.Since.UTC().Format(time.RFC3339) + " by " + by
}

// Policy encodes the pause as the PausePolicy drivers store.
func (s PauseState) Policy() Policy {
	v := url.Values{}
	if s.By != "" {
		v.Set("by", s.By)
	}
	if s.TaskKind != "" {
		v.Set("kind", s.TaskKind)
	}
	if s.Key != "" {
		v.Set("key", s.Key)
	}
	return Policy{Kind: PausePolicy, Key: v.Encode(), Limit: max(s.Since.UnixMilli(), 1)}
}

// ParsePause decodes a PausePolicy; an InvalidArgument error names what is
// wrong with it.
func ParsePause(p Policy) (PauseState, error) {
	if p.Kind != PausePolicy {
		return PauseState{}, Errorf(errcode.InvalidArgument, "policy %s is not a pause", p.Kind)
	}
	if p.Limit <= 0 || p.Period != 0 {
		return PauseState{}, Errorf(errcode.InvalidArgument, "a pause has its start time as Limit (Unix ms, positive) and no period (got %d, %v): build it with PauseState.Policy", p.Limit, p.Period)
	}
	if len(p.Key) > maxPauseKeyLen {
		return PauseState{}, Errorf(errcode.InvalidArgument, "pause key is %d bytes long; keep its kind, key and author to %d", len(p.Key), maxPauseKeyLen)
	}
	v, err := url.ParseQuery(p.Key)
	if err != nil {
		return PauseState{}, Errorf(errcode.InvalidArgument, "pause key %q is not the encoding PauseState.Policy writes: %w", p.Key, err)
	}
	s := PauseState{TaskKind: v.Get("kind"), Key: v.Get("key"), By: v.Get("by"), Since: time.UnixMilli(p.Limit)}
	if err := s.Validate(); err != nil {
		return PauseState{}, err
	}
	return s, nil
}

// Validate returns an InvalidArgument error naming the problem when the
// pause's kind, key or author cannot be stored: each at most
// MaxPolicyKeyLen bytes of valid UTF-8 without control characters.
func (s PauseState) Validate() error {
	for _, f := range []struct{ what, val string }{{"pause --kind", s.TaskKind}, {"pause --key", s.Key}, {"pause author", s.By}} {
		if !utf8.ValidString(f.val) {
			return Errorf(errcode.InvalidArgument, "%s %q is not valid UTF-8 text", f.what, f.val)
		}
		// '=' and '/' are safe here: the stored key is URL-encoded.
		if err := ValidateKey(f.what, strings.NewReplacer("=", "", "/", "").Replace(f.val)); err != nil {
			return err
		}
		if len(f.val) > MaxPolicyKeyLen {
			return Errorf(errcode.InvalidArgument, "%s is %d bytes long; keep it to %d", f.what, len(f.val), MaxPolicyKeyLen)
		}
	}
	return nil
}

// Pauses returns the pauses among ps (skipping any it cannot decode).
func Pauses(ps []Policy) []PauseState {
	var out []PauseState
	for _, p := range ps {
		if p.Kind != PausePolicy {
			continue
		}
		if s, err := ParsePause(p); err == nil {
			out = append(out, s)
		}
	}
	return out
}
