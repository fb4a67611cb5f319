// Package queueurl turns the queue forms the ai4s-jobq command line accepts
// into jobq queue URLs. It is the CLI's concern, not the library's: jobq.Open
// takes URLs only.
package queueurl

import (
	"regexp"
	"strings"
)

// bareAzureQueue matches ai4s-jobq's "account/queue" form.
var bareAzureQueue = regexp.MustCompile(`^[a-z0-9]{3,24}/[a-z0-9][a-z0-9-]{1,62}$`)

// Normalize turns ai4s-jobq's "account/queue" form into
// "azqueue://account/queue". Other strings are returned unchanged, trimmed of
// surrounding space.
func Normalize(s string) string {
	s = strings.TrimSpace(s)
	if !strings.Contains(s, "://") && bareAzureQueue.MatchString(s) {
		return "azqueue://" + s
	}
	return s
}
