package azqueue_test

import (
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/sas"

	azq "github.com/jobq/jobq/backends/azqueue"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// TestSASConnectionString: a connection string with a SAS token works, and
// the token never shows in errors.
func TestSASConnectionString(t *testing.T) {
	t.Parallel()
	if !strings.Contains(connStr, "127.0.0.1:10001") {
		t.Skip("builds its SAS from Azurite's development account key")
	}
	key, err := azqueue.NewSharedKeyCredential("devstoreaccount1",
		"Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==")
	if err != nil {
		t.Fatal(err)
	}
	perms := sas.AccountPermissions{Read: true, Write: true, Delete: true, List: true, Add: true, Create: true, Update: true, Process: true}
	types := sas.AccountResourceTypes{Service: true, Container: true, Object: true}
	qp, err := sas.AccountSignatureValues{
		Protocol:      sas.ProtocolHTTPSandHTTP,
		ExpiryTime:    time.Now().Add(time.Hour).UTC(),
		Permissions:   perms.String(),
		ResourceTypes: types.String(),
	}.SignWithSharedKey(key)
	if err != nil {
		t.Fatal(err)
	}
	opener := &azq.URLOpener{ConnectionString: "QueueEndpoint=http://127.0.0.1:10001/devstoreaccount1;SharedAccessSignature=" + qp.Encode()}
	u, _ := url.Parse(newQueueURL(t))
	d, err := opener.Open(t.Context(), u, driver.OpenOptions{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("open with a SAS connection string: %v", err)
	}
	defer d.Close()
	if _, err := d.Push(t.Context(), []*driver.Message{{ID: "t", Body: []byte(`{"x": 1}`)}}); err != nil {
		t.Fatalf("push: %v", err)
	}
	recs, err := d.Receive(t.Context(), driver.ReceiveParams{Max: 1, Visibility: time.Minute, Wait: 5 * time.Second})
	if err != nil || len(recs) != 1 {
		t.Fatalf("receive: %v, %d", err, len(recs))
	}
	if errs := d.Complete(t.Context(), driver.Completions(recs[0].Lease)); errs != nil {
		t.Fatalf("complete: %v", errs)
	}

	// An error from the service: the queue is gone.
	var c *azqueue.QueueClient
	if !d.As(&c) {
		t.Fatal("As(**azqueue.QueueClient) = false")
	}
	if _, err := c.Delete(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	_, err = d.Push(t.Context(), []*driver.Message{{ID: "t", Body: []byte(`{"x": 1}`)}})
	if errcode.Of(err) != errcode.NotFound {
		t.Fatalf("push to a deleted queue: %v, want NotFound", err)
	}
	if sig := qp.Signature(); strings.Contains(err.Error(), sig) || strings.Contains(err.Error(), url.QueryEscape(sig)) || strings.Contains(err.Error(), "sig=") {
		t.Errorf("error shows the SAS signature: %v", err)
	}
}

func TestConnectionStringErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		conn, url, want string
	}{
		{"AccountName=a;AccountKey=secretsecret;garbage", "", "malformed"},
		{"AccountKey=secretsecret", "", "malformed"},
		// A key cut short when copied: the error names the AccountKey.
		{"DefaultEndpointsProtocol=https;AccountName=a;AccountKey=secretsecret/x;EndpointSuffix=core.windows.net", "", "AccountKey in the connection string from URLOpener.ConnectionString is not valid base64"},
		// Both name the service: the endpoint was ignored without a word,
		// so the queue could be another account's.
		{"UseDevelopmentStorage=true", "azqueue://acct/queue1?endpoint=https://other.queue.core.windows.net/", "endpoint= and the connection string from URLOpener.ConnectionString both name the queue service"},
	}
	for _, c := range cases {
		opener := &azq.URLOpener{ConnectionString: c.conn}
		raw := c.url
		if raw == "" {
			raw = "azqueue://acct/queue1"
		}
		u, _ := url.Parse(raw)
		_, err := opener.Open(t.Context(), u, driver.OpenOptions{Logger: slog.New(slog.DiscardHandler)})
		if errcode.Of(err) != errcode.InvalidArgument || !strings.Contains(err.Error(), c.want) {
			t.Errorf("open with %q: %v, want InvalidArgument mentioning %q", c.conn, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "secretsecret") {
			t.Errorf("error shows the account key: %v", err)
		}
	}
}
