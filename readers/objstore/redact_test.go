package objstore

import (
	"strings"
	"testing"
)

// Redact hides every secret a store URL can carry and keeps what names the store.
func TestRedact(t *testing.T) {
	const canary = "CANARY7f3a"
	for _, c := range []struct{ in, want string }{
		{"https://user:" + canary + "@host.example/a/sat.zarr", "https://REDACTED@host.example/a/sat.zarr"},
		{"https://" + canary + "@host.example/sat.zarr", "https://REDACTED@host.example/sat.zarr"},
		{"https://host.example/sat.zarr?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=" + canary + "&X-Amz-Signature=" + canary + "&X-Amz-Security-Token=" + canary,
			"https://host.example/sat.zarr?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=REDACTED&X-Amz-Signature=REDACTED&X-Amz-Security-Token=REDACTED"},
		{"https://host.example/sat.zarr?access_token=" + canary + "&page=2&sig=" + canary, "https://host.example/sat.zarr?access_token=REDACTED&page=2&sig=REDACTED"},
		{"s3://bucket/sat.zarr", "s3://bucket/sat.zarr"},
		{"/data/sat.zarr", "/data/sat.zarr"},
		{"https://u:" + canary + "@host/%zz?token=" + canary, "https://REDACTED@host/%zz?REDACTED"}, // does not parse
	} {
		got := Redact(c.in)
		if got != c.want || strings.Contains(got, canary) {
			t.Errorf("Redact(%q)\n= %q\nwant %q", c.in, got, c.want)
		}
	}
}
