// Package servicebus starts the Service Bus emulator (sbemu.py, next to this
// file) for tests. The emulator needs /usr/bin/python3 with Debian's
// python3-qpid-proton; .ci/install-proton.sh installs it.
package servicebus

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// Python is the interpreter the emulator runs on. Debian's
// python3-qpid-proton installs the proton module for it.
const Python = "/usr/bin/python3"

// Options configure the emulator and the queues it creates on first use
// (queues created through the admin API take their own settings, with
// Azure's defaults).
type Options struct {
	// LockDuration is the peek-lock duration, 5 seconds to 5 minutes as on
	// Azure. Defaults to 60 seconds.
	LockDuration time.Duration
	// MaxDeliveryCount is how many deliveries a message gets before it is
	// dead-lettered. Defaults to 10, as on Azure.
	MaxDeliveryCount int
	// DuplicateDetectionWindow is the duplicate-detection history. Zero
	// (the default, as on Azure) or negative creates queues without
	// duplicate detection.
	DuplicateDetectionWindow time.Duration
	// ClockOffset is how far the broker's clock is ahead of this machine's
	// (negative: behind). It shifts every time the broker stamps or reads:
	// enqueued times, lock expiries, scheduled enqueue times.
	ClockOffset time.Duration
}

// Faults are a queue's fault switches. Set them with Emulator.SetFaults;
// the zero value turns them all off.
type Faults struct {
	// DropAcks makes the next DropAcks settlements on a receiver link
	// (complete, abandon, dead-letter) take effect without being
	// acknowledged, as when the broker's reply is lost: the client waits
	// in vain.
	DropAcks int
	// AckDelay makes every settlement on a receiver link take effect at
	// once and be acknowledged this late.
	AckDelay time.Duration
	// DetachAfter detaches the next receiver link that delivers this many
	// more messages, right after the last of them: a link detached
	// mid-receive. The messages it delivered stay locked.
	DetachAfter int
}

// Emulator is a running emulator process.
type Emulator struct {
	// AMQPPort is where the AMQP listener accepts connections.
	AMQPPort int
	// AdminPort is where the plain-HTTP ATOM endpoint listens.
	AdminPort int
	cmd       *exec.Cmd
	done      chan struct{}
}

// Available reports why the emulator cannot run here, or nil when it can.
func Available() error {
	if err := exec.Command(Python, "-c", "import proton").Run(); err != nil {
		return fmt.Errorf("the Service Bus emulator needs %s with the proton module (%v): run .ci/install-proton.sh or apt-get install python3-qpid-proton", Python, err)
	}
	return nil
}

// Script returns the path of sbemu.py.
func Script() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "sbemu.py")
}

// Start runs an emulator for the test and stops it when the test ends. It
// skips the test when python3-qpid-proton is missing.
func Start(t testing.TB, opts Options) *Emulator {
	t.Helper()
	if err := Available(); err != nil {
		t.Skip(err.Error())
	}
	e, err := Launch(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Stop)
	return e
}

// Launch starts an emulator process; call Stop when done.
func Launch(ctx context.Context, opts Options) (*Emulator, error) {
	args := []string{Script(), "--port", "0", "--admin-port", "0"}
	if opts.LockDuration != 0 && (opts.LockDuration < 5*time.Second || opts.LockDuration > 5*time.Minute) {
		return nil, fmt.Errorf("the Service Bus emulator refuses LockDuration %v: Azure allows 5s to 5m", opts.LockDuration)
	}
	if opts.ClockOffset != 0 {
		args = append(args, "--clock-offset", strconv.FormatFloat(opts.ClockOffset.Seconds(), 'f', -1, 64))
	}
	if opts.LockDuration > 0 {
		args = append(args, "--lock-duration", strconv.FormatFloat(opts.LockDuration.Seconds(), 'f', -1, 64))
	}
	if opts.MaxDeliveryCount > 0 {
		args = append(args, "--max-delivery-count", strconv.Itoa(opts.MaxDeliveryCount))
	}
	if opts.DuplicateDetectionWindow > 0 {
		args = append(args, "--duplicate-detection-window", strconv.FormatFloat(opts.DuplicateDetectionWindow.Seconds(), 'f', -1, 64))
	}
	cmd := exec.Command(Python, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start Service Bus emulator: %w", err)
	}
	e := &Emulator{cmd: cmd, done: make(chan struct{})}
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			_, err := fmt.Sscanf(sc.Text(), "READY amqp=%d admin=%d", &e.AMQPPort, &e.AdminPort)
			ready <- err
		} else {
			ready <- errors.New("the emulator exited before it was ready")
		}
		for sc.Scan() {
		}
		_ = cmd.Wait()
		close(e.done)
	}()
	select {
	case err := <-ready:
		if err != nil {
			e.Stop()
			return nil, fmt.Errorf("the Service Bus emulator did not start: %w", err)
		}
	case <-time.After(20 * time.Second):
		e.Stop()
		return nil, errors.New("the Service Bus emulator was not ready after 20s")
	case <-ctx.Done():
		e.Stop()
		return nil, ctx.Err()
	}
	return e, nil
}

// ConnectionString returns an emulator connection string for the SDK.
func (e *Emulator) ConnectionString() string {
	return fmt.Sprintf("Endpoint=sb://127.0.0.1:%d;SharedAccessKeyName=emulator;SharedAccessKey=emulator;UseDevelopmentEmulator=true", e.AMQPPort)
}

// AdminTransport returns an HTTP client that sends the admin client's HTTPS
// requests to the emulator's plain-HTTP ATOM endpoint instead.
func (e *Emulator) AdminTransport() *http.Client {
	return &http.Client{Transport: Redirect(fmt.Sprintf("127.0.0.1:%d", e.AdminPort))}
}

// Redirect returns a transport that sends every request to host over plain
// HTTP, keeping its path and query.
func Redirect(host string) http.RoundTripper {
	return roundTripper(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.URL = &url.URL{Scheme: "http", Host: host, Path: r.URL.Path, RawQuery: r.URL.RawQuery}
		r.Host = host
		return http.DefaultTransport.RoundTrip(r)
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// SetFaults sets the fault switches of queue (which must exist);
// "QUEUE/$DeadLetterQueue" sets those of its dead-letter sub-queue.
func (e *Emulator) SetFaults(ctx context.Context, queue string, f Faults) error {
	q := url.Values{}
	q.Set("drop_acks", strconv.Itoa(f.DropAcks))
	q.Set("ack_delay", strconv.FormatFloat(f.AckDelay.Seconds(), 'f', -1, 64))
	q.Set("detach_after", strconv.Itoa(f.DetachAfter))
	u := fmt.Sprintf("http://127.0.0.1:%d/$emulator/faults/%s?%s", e.AdminPort, url.PathEscape(queue), q.Encode())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		return err
	}
	rsp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("set faults on %s: %w", queue, err)
	}
	defer rsp.Body.Close()
	if rsp.StatusCode != http.StatusOK {
		return fmt.Errorf("set faults on %s: the emulator answered %s", queue, rsp.Status)
	}
	return nil
}

// Stop kills the emulator and waits for it to exit.
func (e *Emulator) Stop() {
	if e.cmd.Process != nil {
		_ = e.cmd.Process.Kill()
	}
	select {
	case <-e.done:
	case <-time.After(5 * time.Second):
	}
}
