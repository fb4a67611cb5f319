package preempt

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path"
	"strings"
	"time"
)

// envLabelTimeout bounds the metadata requests of EnvLabel.
const envLabelTimeout = 3 * time.Second

// EnvLabel returns the machine's VM size and region from the metadata
// service of mode (Azure or GCP; Auto detects it), such as
// "Standard_D4s_v5/eastus" or "n2-standard-4/us-central1-a", for the
// worker's environment label. It returns "" and no error for Off (or Auto
// off a cloud VM), and an error when the service does not answer.
func EnvLabel(ctx context.Context, mode string, cfg Config) (string, error) {
	if mode == Auto {
		mode = Detect()
	}
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithTimeout(ctx, envLabelTimeout)
	defer cancel()
	switch mode {
	case Azure:
		return azureLabel(ctx, cfg)
	case GCP:
		return gcpLabel(ctx, cfg)
	}
	return "", nil
}

// azureComputePath is the instance metadata of the VM itself.
const azureComputePath = "/metadata/instance/compute?api-version=2021-02-01"

func azureLabel(ctx context.Context, cfg Config) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Endpoint+azureComputePath, nil)
	if err != nil {
		return "", fmt.Errorf("azure metadata endpoint %q: %w", cfg.Endpoint, err)
	}
	req.Header.Set("Metadata", "true")
	b, _, err := roundTrip(cfg.Client, req)
	if err != nil {
		return "", err
	}
	var doc struct {
		VMSize   string `json:"vmSize"`
		Location string `json:"location"`
	}
	if err := json.Unmarshal(b, &doc); err != nil || doc.VMSize == "" {
		return "", fmt.Errorf("azure instance metadata has no vmSize (%d bytes answered)", len(b))
	}
	return join(doc.VMSize, doc.Location), nil
}

// The GCE metadata paths of the machine type and zone, which answer with
// "projects/N/machineTypes/TYPE" and "projects/N/zones/ZONE".
const (
	gcpMachineTypePath = "/computeMetadata/v1/instance/machine-type"
	gcpZonePath        = "/computeMetadata/v1/instance/zone"
)

func gcpLabel(ctx context.Context, cfg Config) (string, error) {
	var parts [2]string
	for i, p := range []string{gcpMachineTypePath, gcpZonePath} {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Endpoint+p, nil)
		if err != nil {
			return "", fmt.Errorf("gcp metadata endpoint %q: %w", cfg.Endpoint, err)
		}
		req.Header.Set("Metadata-Flavor", "Google")
		b, _, err := roundTrip(cfg.Client, req)
		if err != nil {
			return "", err
		}
		parts[i] = path.Base(strings.TrimSpace(string(b)))
	}
	return join(parts[0], parts[1]), nil
}

func join(size, region string) string {
	if region == "" {
		return size
	}
	return size + "/" + region
}
