package servicebus

import (
	"testing"
)

// TestConnectionStringPrecedence: a connection string the program passes
// (the CLI's --conn-str) wins when it is a Service Bus one; a storage
// account's, meant for azqueue, is skipped. (Not parallel: it sets the
// environment.)
func TestConnectionStringPrecedence(t *testing.T) {
	const (
		given   = "Endpoint=sb://given.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=v"
		storage = "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=a2V5"
		fromEnv = "Endpoint=sb://env.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=v"
		opener  = "Endpoint=sb://opener.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=v"
	)
	for _, tc := range []struct {
		name                   string
		given, opener, sbEnv   string
		genericEnv, want, from string
	}{
		{"given wins", given, opener, fromEnv, "", given, "the program (--conn-str)"},
		{"storage string skipped", storage, "", fromEnv, "", fromEnv, "$" + EnvConnectionString},
		{"opener next", "", opener, fromEnv, "", opener, "URLOpener.ConnectionString"},
		{"generic env with sb", "", "", "", fromEnv, fromEnv, "$" + EnvGenericConnectionString},
		{"generic env with storage", "", "", "", storage, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvConnectionString, tc.sbEnv)
			t.Setenv(EnvGenericConnectionString, tc.genericEnv)
			cs, from := (&URLOpener{ConnectionString: tc.opener}).connectionString(tc.given)
			if cs != tc.want || from != tc.from {
				t.Errorf("connectionString = %q from %q; want %q from %q", cs, from, tc.want, tc.from)
			}
		})
	}
}
