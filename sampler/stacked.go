package sampler

import (
	"fmt"
	"slices"
	"strings"
)

// A store that holds one data array per channel (GFS's: t, u10, v10, ... each over init_time,
// step, latitude and longitude) is read, with the source key variables_as_channels, as one
// array with a channel dimension in front, the data arrays in the store's order, as
// ocf-data-sampler's open_gfs reads it (xarray's to_array(dim="channel")); the coordinate
// "channel" names them, and channels selects among them as for any store. The data arrays
// must agree in dimensions, shape, chunks, dtype and CF decoding.

// stackedName is the name the stacked array has in its dataset (never a store's: a slash).
const stackedName = "variables/as-channels"

// stackedDataset is ds with its data arrays stacked along a new channel dimension.
type stackedDataset struct {
	Dataset
	stack *stackedArray
	names *namesArray
}

// stackVariables stacks ds's data arrays (every array not a dimension or a CF coordinate).
func stackVariables(ds Dataset) (*stackedDataset, error) {
	names, err := dataArrays(ds)
	if err != nil {
		return nil, fmt.Errorf("%v; variables_as_channels reads every data array as a channel", err)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%s has no data array; variables_as_channels reads every data array as a channel", ds)
	}
	parts := make([]Array, len(names))
	for i, n := range names {
		if parts[i], err = ds.Array(n); err != nil {
			return nil, err
		}
		if i > 0 {
			if err := sameButLength(parts[0], parts[i], -1); err != nil {
				return nil, fmt.Errorf("%s/%s and %s/%s: %v; the data arrays read as channels must agree", ds, names[0], ds, n, err)
			}
		}
	}
	if slices.Contains(parts[0].Dims(), "channel") {
		return nil, fmt.Errorf("%s/%s has a channel dimension already; variables_as_channels is for a store of one data array per channel", ds, names[0])
	}
	stack := &stackedArray{parts: parts, shape: append([]int{len(parts)}, parts[0].Shape()...),
		chunks: append([]int{1}, parts[0].Chunks()...), dims: append([]string{"channel"}, parts[0].Dims()...)}
	return &stackedDataset{Dataset: ds, stack: stack, names: &namesArray{names: names}}, nil
}

func (d *stackedDataset) Array(name string) (Array, error) {
	switch name {
	case stackedName:
		return d.stack, nil
	case "channel":
		return d.names, nil
	}
	return d.Dataset.Array(name)
}

// ArrayNames lists the stacked array and the store's coordinates (not its data arrays).
func (d *stackedDataset) ArrayNames() ([]string, error) {
	l, ok := d.Dataset.(interface{ ArrayNames() ([]string, error) })
	if !ok {
		return []string{stackedName, "channel"}, nil
	}
	all, err := l.ArrayNames()
	if err != nil {
		return nil, err
	}
	out := []string{stackedName, "channel"}
	for _, n := range all {
		if !slices.Contains(d.names.names, n) && n != "channel" {
			out = append(out, n)
		}
	}
	return out, nil
}

// stackedArray is arrays of one shape stacked along a new first dimension, "channel".
type stackedArray struct {
	parts         []Array
	shape, chunks []int    // a channel in front of the arrays' own
	dims          []string // "channel" in front of the arrays' own
}

func (s *stackedArray) Shape() []int                          { return s.shape }
func (s *stackedArray) Chunks() []int                         { return s.chunks }
func (s *stackedArray) Dims() []string                        { return s.dims }
func (s *stackedArray) Native() (byte, int)                   { return s.parts[0].Native() }
func (s *stackedArray) TypeName() string                      { return s.parts[0].TypeName() }
func (s *stackedArray) Attr(name string) string               { return s.parts[0].Attr(name) }
func (s *stackedArray) CF() (float64, float64, float64, bool) { return s.parts[0].CF() }

func (s *stackedArray) DecodeChunk(idx []int, dst []byte) error {
	return s.parts[idx[0]].DecodeChunk(idx[1:], dst)
}

// DecodeChunkFound reports the channel's stored chunk (presenceArray).
func (s *stackedArray) DecodeChunkFound(idx []int, dst []byte) (bool, error) {
	if p, ok := s.parts[idx[0]].(presenceArray); ok {
		return p.DecodeChunkFound(idx[1:], dst)
	}
	return true, s.parts[idx[0]].DecodeChunk(idx[1:], dst)
}

// MissingChunkError and ChunkError name the channel's array and chunk (presenceArray).
func (s *stackedArray) MissingChunkError(idx []int) error { return s.ChunkError(idx, nil) }

func (s *stackedArray) ChunkError(idx []int, err error) error {
	if p, ok := s.parts[idx[0]].(presenceArray); ok {
		if err == nil {
			return p.MissingChunkError(idx[1:])
		}
		return p.ChunkError(idx[1:], err)
	}
	if err == nil {
		err = fmt.Errorf("chunk not stored")
	}
	return fmt.Errorf("channel %d, chunk %v: %w", idx[0], idx[1:], err)
}

func (s *stackedArray) Int64s() ([]int64, error)     { return nil, s.notWhole() }
func (s *stackedArray) Float64s() ([]float64, error) { return nil, s.notWhole() }
func (s *stackedArray) Strings() ([]string, error)   { return nil, s.notWhole() }
func (s *stackedArray) Times() ([]int64, error)      { return nil, s.notWhole() }
func (s *stackedArray) Durations() ([]int64, error)  { return nil, s.notWhole() }

func (s *stackedArray) notWhole() error {
	return fmt.Errorf("data arrays read as channels are not read whole")
}

// namesArray is the channel coordinate of a stacked store: its data arrays' names.
type namesArray struct {
	names []string
}

func (n *namesArray) Shape() []int                          { return []int{len(n.names)} }
func (n *namesArray) Chunks() []int                         { return []int{len(n.names)} }
func (n *namesArray) Dims() []string                        { return []string{"channel"} }
func (n *namesArray) Native() (byte, int)                   { return 'U', 0 }
func (n *namesArray) TypeName() string                      { return "<U" }
func (n *namesArray) Attr(string) string                    { return "" }
func (n *namesArray) CF() (float64, float64, float64, bool) { return 1, 0, 0, false }
func (n *namesArray) DecodeChunk([]int, []byte) error       { return n.notNumbers() }
func (n *namesArray) Int64s() ([]int64, error)              { return nil, n.notNumbers() }
func (n *namesArray) Float64s() ([]float64, error)          { return nil, n.notNumbers() }
func (n *namesArray) Strings() ([]string, error)            { return slices.Clone(n.names), nil }
func (n *namesArray) Times() ([]int64, error)               { return nil, n.notNumbers() }
func (n *namesArray) Durations() ([]int64, error)           { return nil, n.notNumbers() }
func (n *namesArray) notNumbers() error {
	return fmt.Errorf("the channel names [%s] are strings", strings.Join(n.names, ", "))
}
