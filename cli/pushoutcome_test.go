package cli_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"

	azq "github.com/jobq/jobq/backends/azqueue"
	"github.com/jobq/jobq/cli"
	"github.com/jobq/jobq/tools/testkit/faultproxy"
)

// azuriteQueue returns a fresh Storage Queue on Azurite, deleted when the
// test ends, or skips the test when Azurite is not running.
func azuriteQueue(t *testing.T) (name string, direct *azqueue.QueueClient) {
	t.Helper()
	if c, err := net.DialTimeout("tcp", "127.0.0.1:10001", time.Second); err != nil {
		t.Skip("needs Azurite's queue service on 127.0.0.1:10001")
	} else {
		c.Close()
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name = "jq-outcome-" + hex.EncodeToString(b)
	svc, err := azqueue.NewServiceClientFromConnectionString(azq.DevelopmentConnectionString, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = svc.DeleteQueue(ctx, name, nil)
		_, _ = svc.DeleteQueue(ctx, name+azq.FailedSuffix, nil)
	})
	return name, svc.NewQueueClient(name)
}

// TestPushReportsUnknownOutcomes pushes to Azure Storage Queue (Azurite)
// through a proxy that resets the connection after forwarding POSTs (Put
// Message): each reset message is stored, and the client never hears so.
// push must say how many outcomes are unknown, exit 0 when nothing was
// refused, never say "not stored" of a task that may be queued, and not
// claim duplicates=0 when the queue holds more messages than tasks.
func TestPushReportsUnknownOutcomes(t *testing.T) {
	t.Parallel()
	lines := func(n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "echo %d\n", i)
		}
		return b.String()
	}
	cases := []struct {
		name     string
		rate     float64 // share of POSTs reset after forwarding
		params   string  // of the queue URL
		args     []string
		stdin    string
		tasks    int
		limit    time.Duration // how long push may retry
		wantCode int
		want     []string // in stderr
	}{
		{
			name: "every POST reset", rate: 1, params: "retries=2&retry_delay=10ms",
			args: []string{"push", "-c", "echo a", "-c", "echo b", "-c", "echo c"}, tasks: 3, limit: 3 * time.Second,
			want: []string{"tasks=0", "duplicates=unknown", "unknown=3", "3 tasks may have been stored",
				"commands (-c, in order) 1–3", "retry_delay=10ms' size", "may queue them twice"},
		},
		{
			name: "every POST reset, --wait", rate: 1, params: "retries=2&retry_delay=10ms",
			args: []string{"push", "--wait", "-c", "echo a"}, tasks: 1, limit: 3 * time.Second, wantCode: cli.ExitFailure,
			want: []string{"unknown=1", "1 task may have been stored", "1 task of unknown outcome not waited for", "retry_delay=10ms' wait "},
		},
		{
			name: "a fifth of POSTs reset", rate: 0.2, params: "retry_delay=10ms",
			args: []string{"push"}, stdin: lines(100), tasks: 100, limit: time.Minute,
			want: []string{"tasks=100"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			name, direct := azuriteQueue(t)
			p, err := faultproxy.Start("http://127.0.0.1:10001", 1)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Close() })
			p.Add(faultproxy.Rule{Match: faultproxy.All(faultproxy.Method(http.MethodPost), faultproxy.PathContains("/"+name+"/messages")),
				Fault: faultproxy.ResetAfter, Rate: c.rate})
			// The queue through the proxy; result records directly.
			connStr := strings.Replace(azq.DevelopmentConnectionString, "http://127.0.0.1:10001", p.URL(), 1) +
				"BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;"
			queue := "azqueue://devstoreaccount1/" + name + "?" + c.params
			ctx, cancel := context.WithTimeout(t.Context(), c.limit)
			defer cancel()
			var out, errOut bytes.Buffer
			code := cli.Run(ctx, append([]string{queue, "--conn-str", connStr}, c.args...), strings.NewReader(c.stdin), &out, &errOut)
			p.Clear()
			stderr := errOut.String()
			props, err := direct.GetProperties(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			queued := int(*props.ApproximateMessagesCount)
			t.Logf("exit %d; %d messages queued for %d tasks; %d resets; stderr:\n%s", code, queued, c.tasks, p.Injected(faultproxy.ResetAfter), stderr)
			if code != c.wantCode {
				t.Errorf("exit %d, want %d", code, c.wantCode)
			}
			for _, w := range c.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr does not say %q", w)
				}
			}
			for _, lie := range []string{"no task was stored", "not stored", "duplicates=0"} {
				if queued > 0 && strings.Contains(stderr, lie) {
					t.Errorf("stderr says %q, and the queue holds %d messages", lie, queued)
				}
			}
			// What push claims stored, and may have stored, against what
			// the queue holds.
			m := regexp.MustCompile(`tasks=(\d+)`).FindStringSubmatch(stderr)
			if m == nil {
				t.Fatalf("no summary line (tasks=N) on stderr")
			}
			stored, _ := strconv.Atoi(m[1])
			if queued < stored {
				t.Errorf("push says %d tasks stored; the queue holds %d messages", stored, queued)
			}
			if queued > c.tasks && !strings.Contains(stderr, "duplicates=unknown") {
				t.Errorf("%d messages queued for %d tasks, and push does not say the duplicates are unknown", queued, c.tasks)
			}
		})
	}
}
