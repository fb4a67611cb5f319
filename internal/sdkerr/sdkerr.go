// Package sdkerr turns the multi-line error texts of engine client
// libraries (azidentity, pgconn) into the one line a jobq error is.
package sdkerr

import (
	"fmt"
	"strings"
)

// OneLine joins the lines of a multi-line SDK error into one. azidentity's
// lists each credential it tried on a line of its own, with the HTTP
// exchange indented below between rules of dashes, and a troubleshooting
// link; pgconn's lists each address and TLS mode it tried, often the same
// failure twice (sslmode=prefer tries TLS, then plain). The CLI printed
// them as they were. Items are joined with "; ", their detail with spaces;
// the rules, links and repeated lines are dropped.
func OneLine(s string) string {
	if !strings.Contains(s, "\n") {
		return s
	}
	var b strings.Builder
	seen := map[string]bool{}
	for _, l := range strings.Split(s, "\n") {
		t := strings.TrimSpace(l)
		if t == "" || strings.Trim(t, "-") == "" || strings.HasPrefix(t, "To troubleshoot") || seen[l] {
			continue
		}
		seen[l] = true
		switch {
		case b.Len() == 0:
		case strings.HasPrefix(l, "\t") && !strings.HasPrefix(l, "\t\t") && !strings.HasSuffix(b.String(), ":"):
			b.WriteString("; ")
		default:
			b.WriteString(" ")
		}
		b.WriteString(t)
	}
	return b.String()
}

// NoCredential tells azidentity's error for a credential chain none of
// whose credentials gave a token (DefaultAzureCredential without a
// service principal, workload or managed identity or `az login`).
func NoCredential(s string) bool {
	return strings.Contains(s, "Attempted credentials:")
}

// NoCredentialHint says what to do about it; env names the variable that
// holds the backend's connection string.
func NoCredentialHint(env string) string {
	return fmt.Sprintf("no Azure credential worked: give a connection string with --conn-str or $%s, sign in with `az login`, or run with a managed identity", env)
}
