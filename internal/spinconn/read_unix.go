//go:build unix

package spinconn

import "syscall"

// canPoll says whether this platform's sockets can be read directly.
const canPoll = true

// readFD reads once from the non-blocking socket fd. empty reports that
// nothing was there to read yet; otherwise n and err are the read's (n 0
// and err nil at the end of the stream).
func readFD(fd uintptr, b []byte) (n int, empty bool, err error) {
	for {
		n, err = syscall.Read(int(fd), b)
		switch err {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return 0, true, nil
		}
		return max(n, 0), false, err
	}
}
