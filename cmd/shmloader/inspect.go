package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/gobatch/gobatch/readers/objstore"
	"github.com/gobatch/gobatch/readers/zarr"
)

func init() {
	register("inspect", "show a Zarr store's groups and arrays: dims, shape, chunks, dtype, codecs, sizes", cmdInspect)
}

func cmdInspect(args []string) int {
	fs := newFlagSet("inspect", "STORE[/GROUP]")
	asJSON := fs.Bool("json", false, "print machine-readable JSON")
	lf := addLogFlags(fs)
	pos, code, ok := fs.parse(args)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		return usageError("inspect", fmt.Errorf("want one STORE argument, got %d (usage: %s)", len(pos), fs.synopsis()))
	}
	if _, err := lf.logger("inspect"); err != nil {
		return usageError("inspect", err)
	}
	h, under, err := objstore.OpenNodePath(pos[0])
	if err != nil {
		return failure("inspect", err)
	}
	rep := describeStore(h, under)
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return failure("inspect", err)
		}
	} else {
		fmt.Print(rep.text())
	}
	// Arrays that could not be opened are listed (with their error) and fail the command.
	failed := 0
	for _, n := range rep.Nodes {
		if n.Error != "" {
			fmt.Fprintf(os.Stderr, "shmloader inspect: %s\n", n.Error)
			failed++
		}
	}
	if failed > 0 {
		return exitFailure
	}
	return exitOK
}

// storeReport is `inspect --json` output (the schema is in python/tests/zarr/test_zarr_inspect.py).
type storeReport struct {
	Store        string       `json:"store"`
	ZarrFormat   int          `json:"zarr_format"`
	Consolidated bool         `json:"consolidated"`
	Nodes        []nodeReport `json:"nodes"`
}

type codecReport struct {
	Name   string          `json:"name"`
	Config json.RawMessage `json:"configuration"`
}

type nodeReport struct {
	Path  string                     `json:"path"`
	Kind  string                     `json:"kind"` // "group" or "array"
	Attrs map[string]json.RawMessage `json:"attributes"`
	Error string                     `json:"error,omitempty"`

	Shape        []int           `json:"shape,omitempty"`
	Chunks       []int           `json:"chunks,omitempty"`
	Shards       []int           `json:"shards"`
	Dims         []string        `json:"dims"`
	DType        string          `json:"dtype,omitempty"`
	DataType     string          `json:"data_type,omitempty"` // as the metadata spells it
	TypeName     string          `json:"type_name,omitempty"` // numpy's name: int16, datetime64[ns], <U5 ...
	Order        string          `json:"order,omitempty"`
	FillValue    json.RawMessage `json:"fill_value,omitempty"`
	Codecs       []codecReport   `json:"codecs"`
	DecodedBytes int64           `json:"decoded_bytes"`
	StoredBytes  int64           `json:"stored_bytes"`
	Ratio        *float64        `json:"ratio"` // decoded / stored; null when unknown or nothing is stored
	ChunksStored int             `json:"chunks_stored"`
	ChunksTotal  int             `json:"chunks_total"`
}

// describeStore reports every node of h at or below the path under.
func describeStore(h *zarr.Hierarchy, under string) *storeReport {
	rep := &storeReport{Store: h.Store.String(), ZarrFormat: h.ZarrFormat, Consolidated: h.Consolidated}
	var walk func(n *zarr.Node)
	walk = func(n *zarr.Node) {
		if under == "" || n.Path == under || strings.HasPrefix(n.Path, under+"/") {
			rep.Nodes = append(rep.Nodes, describeNode(h, n))
		}
		for _, c := range n.Children {
			walk(c)
		}
	}
	walk(h.Root)
	return rep
}

func describeNode(h *zarr.Hierarchy, n *zarr.Node) nodeReport {
	r := nodeReport{Path: n.Path, Kind: "group", Attrs: n.Attrs}
	if r.Attrs == nil {
		r.Attrs = map[string]json.RawMessage{}
	}
	if !n.IsArray {
		return r
	}
	r.Kind = "array"
	a, err := h.OpenArray(n.Path)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	r.Attrs = a.Attrs
	if r.Attrs == nil {
		r.Attrs = map[string]json.RawMessage{}
	}
	r.Shape, r.Chunks, r.Shards, r.Dims = a.Shape, a.Chunks, a.ShardShape, a.DimNames
	if r.Shape == nil {
		r.Shape = []int{}
		r.Chunks = []int{}
	}
	r.DType, r.DataType, r.TypeName = a.DType.NumpyStr(), a.DType.String(), a.DType.Name()
	r.Order = "C"
	if a.Order == 'F' {
		r.Order = "F"
	}
	r.FillValue = a.FillJSON
	if len(r.FillValue) == 0 {
		r.FillValue = json.RawMessage("null")
	}
	r.Codecs = make([]codecReport, 0, len(a.Codecs))
	for _, c := range a.Codecs {
		r.Codecs = append(r.Codecs, codecReport{Name: c.Name, Config: c.Settings()})
	}
	r.DecodedBytes = a.DecodedBytes()
	// The grid of stored objects: shards for a sharded array, chunks otherwise.
	obj := a.Chunks
	if a.ShardShape != nil {
		obj = a.ShardShape
	}
	r.ChunksTotal = 1
	for d, s := range a.Shape {
		r.ChunksTotal *= (s + obj[d] - 1) / obj[d]
	}
	r.ChunksStored, r.StoredBytes, err = a.StoredChunks()
	if err != nil && !errors.Is(err, zarr.ErrUnsupported) {
		r.Error = err.Error()
	}
	if r.StoredBytes > 0 && r.DecodedBytes > 0 {
		ratio := float64(r.DecodedBytes) / float64(r.StoredBytes)
		r.Ratio = &ratio
	}
	return r
}
