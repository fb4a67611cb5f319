// Package shellword quotes strings as words for bash: the worker builds
// task scripts with it, and the CLI the commands it suggests.
package shellword

import "strings"

// Quote returns s as one bash word: unchanged when it holds only
// characters that bash takes literally, else in single quotes.
func Quote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
