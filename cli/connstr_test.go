package cli_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"

	azq "github.com/jobq/jobq/backends/azqueue"
)

// TestConnStrLeavesEnvironment: --conn-str reaches the Azure backend as a
// value; the command no longer exports it into its own environment, where
// every later open (and every library in the process) would see it. (Not
// parallel: it changes the environment.)
func TestConnStrLeavesEnvironment(t *testing.T) {
	if c, err := net.DialTimeout("tcp", "127.0.0.1:10001", time.Second); err != nil {
		t.Skip("needs Azurite's queue service on 127.0.0.1:10001")
	} else {
		c.Close()
	}
	const env = "JOBQ_CONNECTION_STRING"
	t.Setenv(env, "") // restored when the test ends
	os.Unsetenv(env)
	queue := azuriteQueueURL(t, "jq-connstr-")
	for _, args := range [][]string{
		{queue, "--conn-str", azq.DevelopmentConnectionString, "push", "-c", "echo hi"},
		{queue, "--conn-str", azq.DevelopmentConnectionString, "size"},
	} {
		code, out, errOut := run(t, args...)
		if code != 0 {
			t.Fatalf("%s: exit %d, %q %q", args[3], code, out, errOut)
		}
		if args[3] == "size" && strings.TrimSpace(out) != "1" {
			t.Errorf("size = %q, want 1", out)
		}
		if v, set := os.LookupEnv(env); set {
			t.Fatalf("after %s, $%s is set (%d characters): the command changed its environment", args[3], env, len(v))
		}
	}
}

// azuriteQueueURL names a new queue on Azurite (prefix and a random
// suffix) and returns its URL; the queue and its dead-letter queue are
// deleted when t ends.
func azuriteQueueURL(t *testing.T, prefix string) string {
	t.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := prefix + hex.EncodeToString(b)
	t.Cleanup(func() {
		svc, err := azqueue.NewServiceClientFromConnectionString(azq.DevelopmentConnectionString, nil)
		if err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = svc.DeleteQueue(ctx, name, nil)
		_, _ = svc.DeleteQueue(ctx, name+azq.FailedSuffix, nil)
	})
	return "azqueue://devstoreaccount1/" + name
}
