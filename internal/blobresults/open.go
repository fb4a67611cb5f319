package blobresults

import (
	"net/url"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/stash/azblob"
)

// CheckContainerName reports a container name Azure would refuse.
func CheckContainerName(name string) error {
	if !azblob.ValidContainerName(name) {
		return driver.Errorf(errcode.InvalidArgument,
			"result container %q is not a valid container name: 3 to 63 lowercase letters, digits and single hyphens, starting and ending with a letter or digit", name)
	}
	return nil
}

// Open returns the store spec names, for a URL parameter such as
// Service Bus's results=:
//
//	azblob://ACCOUNT/CONTAINER   credentials as for the azblob stash: a connection
//	                             string for ACCOUNT ($JOBQ_CONNECTION_STRING,
//	                             $AZURE_STORAGE_CONNECTION_STRING; UseDevelopmentStorage=true
//	                             is Azurite), else cred, else DefaultAzureCredential
//	https://ACCOUNT.blob.core.windows.net/CONTAINER?SAS
//	                             the container's URL with a SAS token (URL-encoded
//	                             inside the queue URL); without one, cred or
//	                             DefaultAzureCredential
//
// opts configure the SDK client (nil: its defaults). The SAS never appears
// in errors or in Store.Where.
func Open(spec string, cred azcore.TokenCredential, opts *container.ClientOptions) (*Store, error) {
	u, err := url.Parse(spec)
	if err != nil || u.Host == "" {
		return nil, badSpec()
	}
	switch u.Scheme {
	case azblob.Scheme:
		cont := strings.Trim(u.Path, "/")
		if err := CheckContainerName(cont); err != nil {
			return nil, err
		}
		o := &azblob.URLOpener{Credential: cred, ClientOptions: opts}
		c, err := o.ContainerClient(u.Host, cont)
		if err != nil {
			return nil, driver.Errorf(errcode.Of(err), "result container azblob://%s/%s: %w", u.Host, cont, err)
		}
		return New(c, "azblob://"+u.Host+"/"+cont), nil
	case "https", "http":
		where := u.Scheme + "://" + u.Host + u.EscapedPath()
		parts := strings.Split(strings.Trim(u.Path, "/"), "/")
		if err := CheckContainerName(parts[len(parts)-1]); err != nil {
			return nil, err
		}
		if u.Query().Get("sig") != "" {
			c, err := container.NewClientWithNoCredential(u.String(), opts)
			if err != nil {
				return nil, driver.Errorf(errcode.InvalidArgument, "result container %s: %v", where, redactedErr(err))
			}
			return New(c, where), nil
		}
		if u.RawQuery != "" {
			return nil, driver.Errorf(errcode.InvalidArgument, "result container %s: its query is not a SAS token (no sig=); give the container's URL with a SAS, or without a query to sign in with Entra ID", where)
		}
		if cred == nil {
			cred, err = azidentity.NewDefaultAzureCredential(nil)
			if err != nil {
				return nil, driver.Errorf(errcode.PermissionDenied, "result container %s: no Azure credential available: %w (sign in with `az login`, run with a managed identity, or add a SAS token to the container URL)", where, err)
			}
		}
		c, err := container.NewClient(u.String(), cred, opts)
		if err != nil {
			return nil, driver.Errorf(errcode.InvalidArgument, "result container %s: %w", where, err)
		}
		return New(c, where), nil
	}
	return nil, badSpec()
}

func badSpec() error {
	return driver.Errorf(errcode.InvalidArgument,
		"the result container must be azblob://ACCOUNT/CONTAINER or https://ACCOUNT.blob.core.windows.net/CONTAINER[?SAS] (URL-encoded when it is a query parameter)")
}

// redactedErr keeps an SDK error that quotes a URL from showing its SAS.
func redactedErr(err error) string {
	s := err.Error()
	if i := strings.Index(s, "?"); i >= 0 {
		return s[:i] + "?…"
	}
	return s
}
