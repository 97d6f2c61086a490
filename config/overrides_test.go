package config

import "testing"

// TestSegmentStepsOverridesTheAnchor: --segment-steps replaces the anchor source's
// segment_steps (and no other source's); Spell names a setting by every interface.
func TestSegmentStepsOverridesTheAnchor(t *testing.T) {
	raw := map[string]any{"source": []any{
		map[string]any{"name": "nwp", "segment_steps": int64(6)},
		map[string]any{"name": "sat", "anchor": true, "segment_steps": int64(12)},
	}}
	Overrides{SegmentSteps: 48}.apply(raw)
	srcs := raw["source"].([]any)
	if got := srcs[1].(map[string]any)["segment_steps"]; got != int64(48) {
		t.Errorf("anchor's segment_steps = %v, want 48", got)
	}
	if got := srcs[0].(map[string]any)["segment_steps"]; got != int64(6) {
		t.Errorf("another source's segment_steps = %v, want its own 6", got)
	}
	if got := Spell("segment_steps"); got != "segment_steps (segment_steps=, --segment-steps, the anchor source's segment_steps)" {
		t.Errorf("Spell = %q", got)
	}
	if got := Spell("readers"); got != "readers" {
		t.Errorf("Spell of a setting without spellings = %q", got)
	}
}
