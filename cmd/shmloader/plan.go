package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/gobatch/gobatch/config"
	"github.com/gobatch/gobatch/feed"
	"github.com/gobatch/gobatch/sampler"
)

// `shmloader plan`: the dry run. It opens the configured sources as `run` would (metadata and
// coordinates only) and prints what they would do: each source's store, dimensions and window,
// the t0 candidates, the sampling mode against the cache budget, the batch order, the batch's
// tensors and the ring's size. Nothing is decoded and no ring is made.

func init() {
	register("plan", "dry run: what a configuration's sources would sample, and the ring it needs", cmdPlan)
}

// planReport is plan's output (--json writes it as is).
type planReport struct {
	Config   string `json:"config"`
	DataRoot string `json:"data_root,omitempty"`
	Rank     uint64 `json:"rank"`
	World    uint64 `json:"world_size"`
	sampler.Plan
	RingSlots    int   `json:"ring_slots"`
	SegmentBytes int64 `json:"segment_bytes"`
}

func cmdPlan(args []string) int {
	fs := newFlagSet("plan", "--config FILE")
	var f sourceFlags
	configPath := fs.String("config", "", "configuration file (TOML, or JSON when it ends in .json; - reads JSON from stdin)")
	asJSON := fs.Bool("json", false, "print machine-readable JSON")
	addSourceFlags(fs, &f)
	pos, code, ok := fs.parse(args)
	if !ok {
		return code
	}
	switch {
	case len(pos) > 0:
		return usageError("plan", fmt.Errorf("unexpected argument %q (usage: %s)", pos[0], fs.synopsis()))
	case *configPath == "":
		return usageError("plan", errors.New("--config FILE is required (see shmloader plan -h)"))
	}
	stream, err := f.check()
	if err != nil {
		return usageError("plan", err)
	}
	cfg, err := config.Read(*configPath, os.Stdin, f.batch)
	if err != nil {
		return usageError("plan", err)
	}
	rep, err := makePlan(cfg, f, stream)
	if err != nil {
		return usageError("plan", err)
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return failure("plan", err)
		}
		return exitOK
	}
	fmt.Print(rep.text())
	return exitOK
}

// makePlan opens the sources and lays out the ring, as run does, without filling anything.
func makePlan(cfg *config.Config, f sourceFlags, stream sampler.Stream) (*planReport, error) {
	src, err := sampler.Open(cfg, sampler.Options{DataRoot: f.dataRoot, CacheMB: f.cacheMB, Stream: stream})
	if err != nil {
		return nil, err
	}
	defer src.Close()
	layout, err := (feed.Window{}).Layout(cfg, src)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.File, err)
	}
	return &planReport{Config: cfg.File, DataRoot: f.dataRoot, Rank: stream.Rank, World: stream.WorldSize,
		Plan: src.Plan(), RingSlots: layout.Slots, SegmentBytes: layout.SegmentBytes()}, nil
}

// text is the report for a person.
func (r *planReport) text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "config %s", r.Config)
	if r.DataRoot != "" {
		fmt.Fprintf(&b, " (data root %s)", r.DataRoot)
	}
	fmt.Fprintf(&b, ", rank %d of %d\n\nsources\n", r.Rank, r.World)
	for _, s := range r.Sources {
		fmt.Fprintf(&b, "  %s %s: %s", s.Field, s.Name, s.Kind)
		if s.Role != "" {
			fmt.Fprintf(&b, " %s", s.Role)
		}
		if s.Store != "" {
			fmt.Fprintf(&b, ", %s/%s dims (%s) shape %v, window %s", s.Store, s.Variable,
				strings.Join(s.Dims, ", "), s.Shape, plural(s.WindowSteps, "step"))
			fmt.Fprintf(&b, "\n      axes %s", s.Axes)
			for _, ax := range []string{"y", "x"} {
				if o := s.Order[ax]; o != "" {
					fmt.Fprintf(&b, ", %s %s", ax, o)
				}
			}
			b.WriteString(chunksText(s))
		}
		b.WriteString("\n")
	}
	if r.Mode != "" {
		if sp := r.SampleSpace; sp != nil {
			fmt.Fprintf(&b, "\nsampling\n  rules %s: %d (t0, location) pairs over %s, %s mode, from %s\n",
				sp.Rules, sp.Pairs, plural(sp.Locations, "location"), sp.Mode, plural(sp.Periods, "period"))
		} else {
			fmt.Fprintf(&b, "\nsampling\n  t0 candidates %d of %d anchor times, %d centres\n", r.Candidates, r.AnchorTimes, r.Centres)
		}
		if r.Locations > 0 {
			fmt.Fprintf(&b, "  site-anchored: %d locations kept, %d dropped\n", r.Locations, r.LocationsDropped)
		}
		for _, e := range r.SiteExclusions {
			fmt.Fprintf(&b, "    left out: %s\n", e)
		}
		for _, rej := range r.Rejections {
			fmt.Fprintf(&b, "    %s\n", rej)
		}
		fmt.Fprintf(&b, "  decoded data %s against a cache of %s: %s sampling\n", bytesText(r.DecodedBytes), bytesText(r.CacheBytes), r.Mode)
		b.WriteString(r.SamplingText())
	}
	if r.Order == config.OrderEpochs {
		fmt.Fprintf(&b, "  order epochs: %d samples per epoch, %d batches per epoch for this rank\n", r.Samples, r.EpochBatches)
	} else {
		b.WriteString("  order stream\n")
	}
	fmt.Fprintf(&b, "\nbatch %s in %s\n", bytesText(r.BatchBytes), plural(len(r.Tensors), "tensor"))
	for _, t := range r.Tensors {
		fmt.Fprintf(&b, "  %-12s %s %v %s\n", t.Name, t.DType, t.Shape, bytesText(t.Bytes))
	}
	fmt.Fprintf(&b, "ring %d slots, %s of shared memory\n", r.RingSlots, bytesText(r.SegmentBytes))
	return b.String()
}

// chunksText is a source's stored chunks from its store's listing, and what the missing
// ones become ("" when the store cannot list).
func chunksText(s sampler.SourcePlan) string {
	if !s.ChunksListed || s.MissingChunkFraction == nil {
		return ""
	}
	t := fmt.Sprintf("\n      chunks %d of %d stored", s.ChunksStored, s.ChunksTotal)
	if f := *s.MissingChunkFraction; f > 0 {
		then := "read as the fill value"
		if s.MissingChunks == sampler.MissingError {
			then = "refused (missing_chunks = \"error\")"
		}
		t += fmt.Sprintf(", %.1f %% missing: %s", 100*f, then)
	}
	return t
}
