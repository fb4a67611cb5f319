package cli_test

import (
	"os"
	"strings"
	"testing"

	"github.com/jobq/jobq/cli"
)

// TestAzureWithoutCredentialIsOneLine: an Azure queue opened where no
// credential works (no connection string, no service principal, workload
// or managed identity, no `az login`) fails with one line that says what
// to give, not azidentity's text of a dozen lines (each credential tried,
// the HTTP exchange between rules of dashes, a troubleshooting link). Not
// parallel: it clears the variables azidentity reads.
func TestAzureWithoutCredentialIsOneLine(t *testing.T) {
	for _, k := range []string{"JOBQ_CONNECTION_STRING", "JOBQ_SERVICEBUS_CONNECTION_STRING", "AZURE_STORAGE_CONNECTION_STRING",
		"DEFAULT_IDENTITY_CLIENT_ID", "AZURE_CLIENT_ID", "AZURE_CLIENT_SECRET", "AZURE_CLIENT_CERTIFICATE_PATH",
		"AZURE_TENANT_ID", "AZURE_FEDERATED_TOKEN_FILE", "AZURE_USERNAME", "AZURE_TOKEN_CREDENTIALS"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	for _, q := range []string{"hdacct/hdq", "sb://hdns/hdq"} {
		t.Run(q, func(t *testing.T) {
			code, _, errOut := run(t, q, "-qq", "stats", "--sample", "0")
			if !strings.Contains(errOut, "Attempted credentials") {
				t.Skipf("a credential worked here, or none was tried: exit %d, %s", code, errOut)
			}
			if code != cli.ExitFailure || !strings.Contains(errOut, "no Azure credential worked: give a connection string with --conn-str") {
				t.Errorf("exit %d, stderr %q; want exit 1 saying what to give", code, errOut)
			}
			if n := strings.Count(strings.TrimSpace(errOut), "\n"); n != 0 || strings.Contains(errOut, "-----") {
				t.Errorf("stderr has %d more lines; want one:\n%s", n, errOut)
			}
		})
	}
}
