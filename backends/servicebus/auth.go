package servicebus

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/redact"
)

// connection is what connect builds.
type connection struct {
	client *azservicebus.Client
	admin  *admin.Client
	where  string // the namespace host, for messages
}

// connectionString returns the connection string to use and where it came
// from, or "" when there is none.
func (o *URLOpener) connectionString(given string) (string, string) {
	if isServiceBus(given) {
		return strings.TrimSpace(given), "the program (--conn-str)"
	}
	if o.ConnectionString != "" {
		return o.ConnectionString, "URLOpener.ConnectionString"
	}
	if s := strings.TrimSpace(os.Getenv(EnvConnectionString)); s != "" {
		return s, "$" + EnvConnectionString
	}
	if s := os.Getenv(EnvGenericConnectionString); isServiceBus(s) {
		return strings.TrimSpace(s), "$" + EnvGenericConnectionString
	}
	return "", ""
}

// isServiceBus reports whether cs is a Service Bus connection string
// (Endpoint=sb://...), not one for another service such as Storage: the
// CLI's --conn-str and $JOBQ_CONNECTION_STRING serve every Azure backend.
func isServiceBus(cs string) bool {
	e, ok := connField(cs, "Endpoint")
	return ok && strings.HasPrefix(strings.ToLower(e), "sb://")
}

// connField returns the value of key in an Azure connection string.
func connField(cs, key string) (string, bool) {
	for _, part := range strings.Split(cs, ";") {
		k, v, ok := strings.Cut(part, "=")
		if ok && strings.EqualFold(strings.TrimSpace(k), key) {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}

// retryOptions carries the URL's retry settings into the SDK, which retries
// transient AMQP errors and re-creates lost connections and links with
// exponential backoff.
func retryOptions(c config) azservicebus.RetryOptions {
	retries := int32(c.retries)
	if retries == 0 {
		retries = -1 // the SDK: 0 means its default of 3, negative means none
	}
	return azservicebus.RetryOptions{MaxRetries: retries, RetryDelay: c.retryDelay, MaxRetryDelay: 30 * time.Second}
}

// connect creates the AMQP client and, where an admin endpoint is
// reachable, the admin client.
func (o *URLOpener) connect(c config, given string, log *slog.Logger) (connection, error) {
	opts := &azservicebus.ClientOptions{RetryOptions: retryOptions(c)}
	adminOpts := &admin.ClientOptions{ClientOptions: azcore.ClientOptions{
		// MaxRetries as for the AMQP client: azcore, too, reads 0 as its default of 3.
		Retry: policy.RetryOptions{MaxRetries: retryOptions(c).MaxRetries, RetryDelay: c.retryDelay, MaxRetryDelay: 30 * time.Second},
	}}
	adminHost := c.admin
	if cs, from := o.connectionString(given); cs != "" {
		endpoint, _ := connField(cs, "Endpoint")
		eu, err := url.Parse(endpoint)
		if err != nil || eu.Host == "" {
			return connection{}, driver.Errorf(errcode.InvalidArgument,
				"the connection string from %s has no valid Endpoint=sb://NAMESPACE.servicebus.windows.net/ (%s)", from, redact.String(cs))
		}
		emulator, _ := connField(cs, "UseDevelopmentEmulator")
		if isEmu, _ := strconv.ParseBool(emulator); isEmu && adminHost == "" {
			adminHost = net.JoinHostPort(eu.Hostname(), strconv.Itoa(DefaultEmulatorAdminPort))
		}
		if c.namespace != "" && !strings.EqualFold(c.namespace, eu.Host) && !strings.EqualFold(strings.TrimSuffix(c.namespace, ".servicebus.windows.net"), eu.Hostname()) {
			log.Info("servicebus: using the connection string's namespace; the URL's is ignored",
				"connection_string_from", from, "namespace", eu.Host, "url_namespace", c.namespace)
		}
		client, err := azservicebus.NewClientFromConnectionString(cs, opts)
		if err != nil {
			return connection{}, driver.Errorf(errcode.InvalidArgument,
				"the connection string from %s is malformed (%s): %v", from, redact.String(cs), err)
		}
		if adminHost != "" {
			adminOpts.Transport = &http.Client{Transport: plainHTTP(adminHost)}
		}
		adm, err := admin.NewClientFromConnectionString(cs, adminOpts)
		if err != nil {
			return connection{}, driver.Errorf(errcode.InvalidArgument,
				"the connection string from %s is malformed (%s): %v", from, redact.String(cs), err)
		}
		return connection{client: client, admin: adm, where: eu.Host}, nil
	}
	if c.namespace == "" {
		return connection{}, driver.Errorf(errcode.InvalidArgument,
			"no Service Bus namespace: use sb://NAMESPACE/QUEUE, or set $%s to a connection string", EnvConnectionString)
	}
	cred := o.Credential
	if cred == nil {
		dc, err := azidentity.NewDefaultAzureCredential(nil)
		if err != nil {
			return connection{}, driver.Errorf(errcode.PermissionDenied,
				"no Azure credential for Service Bus namespace %s: %v (sign in with `az login`, use a managed identity, or set $%s)", c.namespace, err, EnvConnectionString)
		}
		cred = dc
	}
	client, err := azservicebus.NewClient(c.namespace, cred, opts)
	if err != nil {
		return connection{}, fmt.Errorf("servicebus: %w", err)
	}
	if adminHost != "" {
		adminOpts.Transport = &http.Client{Transport: plainHTTP(adminHost)}
	}
	adm, err := admin.NewClient(c.namespace, cred, adminOpts)
	if err != nil {
		return connection{}, fmt.Errorf("servicebus admin: %w", err)
	}
	return connection{client: client, admin: adm, where: c.namespace}, nil
}

// plainHTTP sends the admin client's HTTPS requests to host over plain HTTP,
// as emulators serve the admin API.
func plainHTTP(host string) http.RoundTripper {
	return roundTripper(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.URL.Scheme, r.URL.Host, r.Host = "http", host, host
		resp, err := http.DefaultTransport.RoundTrip(r)
		if err != nil {
			// The SDK's message names the namespace's https URL, not host.
			return nil, fmt.Errorf("the plain-HTTP admin endpoint %s (the emulator's admin port: set admin=HOST:PORT in the queue URL): %w", host, err)
		}
		return resp, nil
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
