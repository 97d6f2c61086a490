package feed

import (
	"encoding/json"
	"fmt"

	"github.com/gobatch/gobatch/config"
	"github.com/gobatch/gobatch/ring"
	"github.com/gobatch/gobatch/sampler"
)

// description is the batch description's JSON (PROTOCOL.md 2.9), members in that order.
type description struct {
	Order        string       `json:"order"`
	EpochBatches uint64       `json:"epoch_batches,omitempty"`
	Samples      uint64       `json:"samples,omitempty"`
	View         sampler.View `json:"view,omitempty"`
	Warnings     []string     `json:"warnings,omitempty"`
}

// Describe is the batch description of a ring whose sources report st, present their batches
// as v and warn of warnings: what the consumer needs to know of a batch besides its tensors,
// so that it never reads the configuration or asks another process.
func Describe(st sampler.Stats, v sampler.View, warnings []string) ([]byte, error) {
	d := description{Order: config.OrderStream, View: v, Warnings: warnings}
	if st.Order == config.OrderEpochs {
		d.Order, d.EpochBatches, d.Samples = config.OrderEpochs, st.EpochBatches, st.Samples
	}
	b, err := json.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("batch description: %w", err)
	}
	if len(b) > ring.MaxDescription {
		return nil, fmt.Errorf("the batch description (the tensors' nesting and names) takes %d bytes, more than the ring's %d; expected fewer or shorter channel or source names", len(b), ring.MaxDescription)
	}
	return b, nil
}
