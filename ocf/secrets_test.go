package ocf_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gobatch/gobatch/config"
	_ "github.com/gobatch/gobatch/ocf" // the YAML format and the "ocf" rule set
	"github.com/gobatch/gobatch/sampler"
)

// A secret planted in each place a store path can carry one (an environment variable under
// !ENV, a URL's password, a presigned URL's signature) never appears in the errors of reading
// the file and opening its stores; the messages name the variable or say REDACTED instead.
func TestSecretsNeverPrinted(t *testing.T) {
	const canary = "CANARYd41f9"
	dir := t.TempDir()
	t.Setenv("GOBATCH_TEST_SECRET_DIR", filepath.Join(dir, canary))
	for _, sat := range []string{
		"!ENV ${GOBATCH_TEST_SECRET_DIR}/sat.zarr",
		"http://reader:" + canary + "@127.0.0.1:1/sat.zarr",
		"https://127.0.0.1:1/sat.zarr?X-Amz-Credential=" + canary + "&X-Amz-Signature=" + canary,
	} {
		yaml := strings.Replace(ocfYAML, "SATELLITE", sat, 1)
		path := filepath.Join(dir, "pvnet.yaml")
		if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg, err := config.LoadWith(path, config.Overrides{BatchSize: 2})
		if err != nil {
			t.Fatalf("%s: %v", sat, err)
		}
		_, err = sampler.Open(cfg, sampler.Options{DataRoot: dir})
		if err == nil {
			t.Fatalf("%s: a store that does not exist opened", sat)
		}
		msg := err.Error()
		if strings.Contains(msg, canary) {
			t.Errorf("%s: the secret is printed: %s", sat, msg)
		}
		if !strings.Contains(msg, "${GOBATCH_TEST_SECRET_DIR}") && !strings.Contains(msg, "REDACTED") {
			t.Errorf("%s: the message says neither the variable nor REDACTED: %s", sat, msg)
		}
	}
}

const ocfYAML = `input_data:
  satellite:
    zarr_path: SATELLITE
    time_resolution_minutes: 5
    interval_start_minutes: -30
    interval_end_minutes: 0
    image_size_pixels_height: 8
    image_size_pixels_width: 10
    channels: [IR_016]
    normalisation_constants:
      IR_016: {mean: 1.0, std: 2.0}
`

// The ring's slots, which a YAML file cannot hold, come from the override every interface
// spells: shmloader's --slots, the Loader's slots=.
func TestSlotsOverrideForAYAMLFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pvnet.yaml")
	if err := os.WriteFile(path, []byte(strings.Replace(ocfYAML, "SATELLITE", "sat.zarr", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	o, err := config.ParseArgs([]string{"--batch-size", "2", "--slots", "6"})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.LoadWith(path, o)
	if err != nil || cfg.Ring.Slots != 6 {
		t.Fatalf("--slots 6: slots %d, %v", cfg.Ring.Slots, err)
	}
	o.Slots = 1
	if _, err := config.LoadWith(path, o); err == nil || !strings.Contains(err.Error(), "slots") {
		t.Fatalf("--slots 1: %v; want a refusal naming slots", err)
	}
}
