package sampler

import (
	"fmt"
	"strings"
)

// dimsKeyError is a mapping error that the source's dims table causes (the store is not at
// fault): its message names the dims key.
type dimsKeyError struct{ error }

// Dimensions by name: each role has canonical axes (the order of its output tensor and of the
// chunks in the cache); a store's dimensions are mapped onto them by name, whatever their order.

// Canonical axes (the keys of a source's dims table).
const (
	axisTime    = "time"
	axisChannel = "channel"
	axisY       = "y"
	axisX       = "x"
	axisInit    = "init_time"
	axisStep    = "step"
	axisID      = "id"
)

// axisSpellings are the store dimension names accepted for each canonical axis, in the order
// they are tried: the one list of spellings (messages print it).
var axisSpellings = map[string][]string{
	axisTime:    {"time", "time_utc", "datetime_gmt"},
	axisChannel: {"channel", "channels", "variable"},
	axisY:       {"y", "y_geostationary", "y_osgb", "latitude", "lat"},
	axisX:       {"x", "x_geostationary", "x_osgb", "longitude", "lon"},
	axisInit:    {"init_time", "init_time_utc"},
	axisStep:    {"step"},
	axisID:      {"system", "location_id", "gsp_id", "ss_id", "site_id"},
}

// roleAxes are each role's canonical axes in output order. A channel axis may be absent from
// the store (one channel).
var roleAxes = map[string][]string{
	RoleGrid:   {axisTime, axisChannel, axisY, axisX},
	RoleNWP:    {axisInit, axisStep, axisChannel, axisY, axisX},
	RolePoints: {axisTime, axisID},
}

// lonLatNames are the spellings of x and y that mean longitude and latitude: a source whose
// axes (or, for points, positions) carry them is in GeographicCRS unless its crs says
// otherwise (align.go).
var lonLatNames = map[string]bool{"longitude": true, "lon": true, "latitude": true, "lat": true}

// dimMap is how a store's dimensions map onto a role's canonical axes.
type dimMap struct {
	axes  []string // the role's canonical axes
	names []string // store dimension of each canonical axis; "" when absent (channel)
	perm  []int    // store axis of each canonical axis; -1 when absent
}

// name is the store dimension of canonical axis ax ("" when absent or not an axis of the role).
func (m dimMap) name(ax string) string {
	for i, a := range m.axes {
		if a == ax {
			return m.names[i]
		}
	}
	return ""
}

// axis is the canonical position of ax (-1 when not an axis of the role).
func (m dimMap) axis(ax string) int {
	for i, a := range m.axes {
		if a == ax {
			return i
		}
	}
	return -1
}

// String describes the mapping for messages: "time=time channel=variable y=y x=x".
func (m dimMap) String() string {
	parts := make([]string, len(m.axes))
	for i, a := range m.axes {
		n := m.names[i]
		if n == "" {
			n = "(absent)"
		}
		parts[i] = a + "=" + n
	}
	return strings.Join(parts, " ")
}

// identity reports whether the canonical order keeps the store's memory order (absent axes,
// of size 1, change nothing): a chunk then needs no transposition.
func (m dimMap) identity() bool {
	last := -1
	for _, p := range m.perm {
		if p < 0 {
			continue
		}
		if p < last {
			return false
		}
		last = p
	}
	return true
}

// acceptedNames lists the spellings of a role's axes for messages:
// `time: time, time_utc, datetime_gmt; channel: ...`.
func acceptedNames(role string) string {
	var parts []string
	for _, ax := range roleAxes[role] {
		parts = append(parts, ax+": "+strings.Join(axisSpellings[ax], ", "))
	}
	return strings.Join(parts, "; ")
}

// mapDims maps store dimensions dims onto role's canonical axes: an entry of override (a
// canonical axis to a store name: the source's dims table) first, else the one store dimension
// spelled as the axis. Every store dimension must be mapped, every axis but channel found.
// Errors say what is wrong; the caller adds the store and array.
func mapDims(role string, dims []string, override map[string]string) (dimMap, error) {
	axes := roleAxes[role]
	m := dimMap{axes: axes, names: make([]string, len(axes)), perm: make([]int, len(axes))}
	used := make([]int, len(dims)) // canonical axis + 1 that took each store dimension
	where := func(name string) int {
		for i, d := range dims {
			if d == name {
				return i
			}
		}
		return -1
	}
	for c, ax := range axes {
		m.perm[c] = -1
		if name, ok := override[ax]; ok {
			i := where(name)
			if i < 0 {
				return m, dimsKeyError{fmt.Errorf("dims.%s = %q is not a dimension of the array (it has %s)", ax, name, dimList(dims))}
			}
			m.perm[c] = i
		} else {
			for _, s := range axisSpellings[ax] {
				i := where(s)
				if i < 0 || inOverride(override, s) {
					continue
				}
				if m.perm[c] >= 0 {
					return m, fmt.Errorf("dimensions %q and %q both name axis %s; set dims = { %s = \"...\" } to choose one",
						dims[m.perm[c]], s, ax, ax)
				}
				m.perm[c] = i
			}
		}
		if m.perm[c] < 0 {
			if ax == axisChannel {
				continue // no channel axis: one channel
			}
			return m, fmt.Errorf("no %s dimension among %s; accepted names (role %q): %s; or map it with dims = { %s = \"<name>\" }",
				ax, dimList(dims), role, acceptedNames(role), ax)
		}
		i := m.perm[c]
		if used[i] > 0 {
			return m, fmt.Errorf("dimension %q is mapped to both %s and %s", dims[i], axes[used[i]-1], ax)
		}
		used[i] = c + 1
		m.names[c] = dims[i]
	}
	for i, u := range used {
		if u == 0 {
			return m, fmt.Errorf("dimension %q of %s is not an axis of role %q; accepted names: %s; or map it with the dims table",
				dims[i], dimList(dims), role, acceptedNames(role))
		}
	}
	return m, nil
}

func inOverride(override map[string]string, name string) bool {
	for _, v := range override {
		if v == name {
			return true
		}
	}
	return false
}

func dimList(dims []string) string { return "(" + strings.Join(dims, ", ") + ")" }
