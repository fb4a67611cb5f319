// Package taskkey recognises the task IDs that backends store compactly:
// jobq's default task ID (and ai4s-jobq's) is an MD5 in 32 lowercase hex
// digits, which fits in 16 bytes.
package taskkey

// Canonical reports whether id is 32 lowercase hex digits.
func Canonical(id string) bool {
	if len(id) != 32 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
