package azblob

import (
	"fmt"
	"strings"
	"testing"
)

// TestConnectionAccount: which account a connection string serves decides
// whether the store uses it for a URL.
func TestConnectionAccount(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ cs, want string }{
		{DevelopmentConnectionString, "devstoreaccount1"},
		{"DefaultEndpointsProtocol=https;AccountName=prod01;AccountKey=a2V5;EndpointSuffix=core.windows.net", "prod01"},
		{"accountname=lower;AccountKey=a2V5", "lower"},
		{"BlobEndpoint=https://sasacct.blob.core.windows.net/;SharedAccessSignature=sv=2020&sig=x", "sasacct"},
		{"BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;SharedAccessSignature=sv=2020&sig=x", "devstoreaccount1"},
		{"QueueEndpoint=https://q.queue.core.windows.net/;SharedAccessSignature=sig=x", ""},
		{"", ""},
	} {
		if got := connectionAccount(tc.cs); got != tc.want {
			t.Errorf("connectionAccount(%.40q) = %q, want %q", tc.cs, got, tc.want)
		}
	}
}

// TestConnectionStringChoice: the first connection string for the URL's
// account wins; one for another account is passed over.
func TestConnectionStringChoice(t *testing.T) {
	t.Setenv(EnvConnectionString, "AccountName=queueacct;AccountKey=a2V5")
	t.Setenv(EnvAzureConnectionString, "UseDevelopmentStorage=true")
	o := &URLOpener{ConnectionString: "AccountName=mine;AccountKey=a2V5"}
	for _, tc := range []struct{ account, from string }{
		{"mine", "URLOpener.ConnectionString"},
		{"queueacct", "$" + EnvConnectionString},
		{"devstoreaccount1", "$" + EnvAzureConnectionString},
		{"nobody", ""},
	} {
		if _, from := o.connectionString(tc.account); from != tc.from {
			t.Errorf("account %s: connection string from %q, want %q", tc.account, from, tc.from)
		}
	}
}

// TestURLOpenerPrintsNoCredential: an opener printed by a program (%v,
// %+v, %s) says whether a connection string is set, never what it holds.
func TestURLOpenerPrintsNoCredential(t *testing.T) {
	t.Parallel()
	const secret = "S3CRETkey"
	o := &URLOpener{ConnectionString: "AccountName=a;AccountKey=" + secret + ";SharedAccessKey=" + secret}
	for _, format := range []string{"%v", "%+v", "%s"} {
		got := fmt.Sprintf(format, o)
		if strings.Contains(got, secret) || !strings.Contains(got, "connection string set: true") {
			t.Errorf("Sprintf(%q) = %q; want it to say a connection string is set, without it", format, got)
		}
	}
}
