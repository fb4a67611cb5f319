package cli_test

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/sas"
)

// TestPushWithQueueOnlyRightsGoesOnWithoutGroup: a push without --group
// makes up a group, kept in the result container (Blob Storage). With
// credentials for the queue service only (a queue SAS, or an identity
// with just "Storage Queue Data Contributor", as ai4s-jobq needs) that
// write is refused; the push must still store the task, without a group,
// and say so, rather than fail.
//
// A worker with the same credentials cannot complete the tasks it runs
// (their result records go to that container too) and must say so.
func TestPushWithQueueOnlyRightsGoesOnWithoutGroup(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{"127.0.0.1:10001", "127.0.0.1:10000"} {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			t.Skip("needs Azurite's queue and blob services")
		}
		c.Close()
	}
	key, err := azqueue.NewSharedKeyCredential("devstoreaccount1",
		"Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==")
	if err != nil {
		t.Fatal(err)
	}
	perms := sas.AccountPermissions{Read: true, Write: true, Delete: true, List: true, Add: true, Create: true, Update: true, Process: true}
	types := sas.AccountResourceTypes{Service: true, Container: true, Object: true}
	qp, err := sas.AccountSignatureValues{ // signs for the queue service only
		Protocol:      sas.ProtocolHTTPSandHTTP,
		ExpiryTime:    time.Now().Add(time.Hour).UTC(),
		Permissions:   perms.String(),
		ResourceTypes: types.String(),
	}.SignWithSharedKey(key)
	if err != nil {
		t.Fatal(err)
	}
	connStr := "QueueEndpoint=http://127.0.0.1:10001/devstoreaccount1;BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;SharedAccessSignature=" + qp.Encode()
	queue := azuriteQueueURL(t, "jq-nogroup-")
	code, out, errOut := run(t, queue, "--conn-str", connStr, "push", "-c", "echo one", "-c", "echo two")
	if code != 0 {
		t.Fatalf("push with queue-only rights: exit %d, %q %q; want the tasks stored without a group", code, out, errOut)
	}
	if !strings.Contains(errOut, "pushing without a group") || strings.Count(errOut, "could not be recorded") != 1 {
		t.Errorf("push with queue-only rights logged %q; want one warning that the group is dropped", errOut)
	}
	if strings.Contains(errOut, "group=push-") && strings.Contains(errOut, "msg=pushed") && strings.Contains(errOut[strings.Index(errOut, "msg=pushed"):], "group=") {
		t.Errorf("the pushed line names a group that was not recorded: %q", errOut)
	}
	code, out, errOut = run(t, queue, "--conn-str", connStr, "size")
	if code != 0 || strings.TrimSpace(out) != "2" {
		t.Errorf("size after the push = %q (exit %d, %q), want 2", out, code, errOut)
	}

	// A worker with these credentials runs the tasks but cannot store their
	// records: it settles them without (it ran each again after every
	// lease, without end), and says so once.
	code, _, errOut = run(t, queue, "--conn-str", connStr, "worker", "--time-limit", "60s")
	if code != 0 || strings.Count(errOut, "tasks are settled without them") != 1 || strings.Contains(errOut, "tasks are not affected") {
		t.Errorf("a worker that cannot write the result container: exit %d, logged %q; want exit 0 and one error saying the tasks are settled without records", code, errOut)
	}
	code, out, errOut = run(t, queue, "--conn-str", connStr, "size")
	if code != 0 || strings.TrimSpace(out) != "0" {
		t.Errorf("size after the worker = %q (exit %d, %q), want 0: both tasks completed", out, code, errOut)
	}
}
