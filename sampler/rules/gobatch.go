package rules

// Gobatch is gobatch's own rule set (docs/DATA.md), the default: a dropout fills every step
// after t0 + the cut-off, a quotient's NaN becomes the fill value (an infinity stays), batches
// are (time, channel, y, x) in store order with int64 t0 and presented flat, and NWP runs are
// neither dropped out nor differenced.
var Gobatch Rules = gobatch{}

// GobatchName is the name of gobatch's own rule set (key rules).
const GobatchName = "gobatch"

type gobatch struct{}

func init() { Register(Gobatch) }

func (gobatch) Name() string { return GobatchName }

func (gobatch) Check(s SourceKeys) (key, why string) {
	if s.Role != "nwp" {
		return "", ""
	}
	if s.DropoutFraction > 0 {
		return "dropout_fraction", "dropout of NWP runs (moving the latest run an example may use) is not in gobatch's rules"
	}
	if s.AccumChannels != nil {
		return "accum_channels", "accumulated channels are not in gobatch's rules"
	}
	return "", ""
}

func (gobatch) DropoutFills(w Window, cut int64) (from, to int) { return w.StepsUpTo(cut), w.N }

func (gobatch) SiteCrop() AxisCrop { return nil }

func (gobatch) WindowT0(t0, _ int64) int64 { return t0 }

func (gobatch) NWPTargets(NWP) (Targets, error) { return nil, nil }

func (gobatch) Pairs(*SpaceInput) (PairSpace, error) { return nil, nil }

func (gobatch) FillQuotient(row []float32, fill float32) {
	for i, v := range row {
		if v != v {
			row[i] = fill
		}
	}
}

func (gobatch) FillQuotient64(row []float64, fill float64) {
	for i, v := range row {
		if v != v {
			row[i] = fill
		}
	}
}

func (gobatch) Layout() Layout { return Layout{} }

func (gobatch) View(Batch) View { return nil }
