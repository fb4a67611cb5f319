//go:build !unix

package spinconn

// canPoll says whether this platform's sockets can be read directly; on
// this one they cannot, and Wrap returns connections as they are.
const canPoll = false

// readFD is never called here.
func readFD(uintptr, []byte) (int, bool, error) { return 0, true, nil }
