package config

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
)

// Table is one table of the configuration (a TOML table or a JSON object) seen through typed
// getters. Every getter records its key as known; a wrong type or a missing required key is
// recorded as a FieldError naming the key's full path, and the getter then returns the zero
// value (or the default). After a decoder has read what it needs, the parser reports every key
// that no getter asked for as unknown, listing the keys that were expected.
//
// Values are what the TOML or JSON decoder produced: string, bool, int64 (TOML), float64 (TOML),
// json.Number (JSON), []any, []map[string]any and map[string]any. A JSON null counts as absent.
type Table struct {
	path  string // "batch", "source[1]"
	raw   map[string]any
	known []string
	c     *collector
}

func newTable(path string, raw map[string]any, c *collector) *Table {
	return &Table{path: path, raw: raw, c: c}
}

// Path is the table's path as it appears in error messages, e.g. "source[1]".
func (t *Table) Path() string { return t.path }

// Field is the path of key in this table, e.g. "source[1].dtype".
func (t *Table) Field(key string) string {
	if t.path == "" {
		return key
	}
	return t.path + "." + key
}

// Errorf records a problem with key (which need not exist; an empty key names the table).
func (t *Table) Errorf(key, format string, args ...any) {
	f := t.path
	if key != "" {
		f = t.Field(key)
	}
	t.c.add(f, format, args...)
}

// Has reports whether key is present (and not null). It marks the key as known.
func (t *Table) Has(key string) bool {
	_, ok := t.get(key)
	return ok
}

// Raw returns the undecoded value of key. It marks the key as known.
func (t *Table) Raw(key string) (any, bool) { return t.get(key) }

func (t *Table) get(key string) (any, bool) {
	t.markKnown(key)
	v, ok := t.raw[key]
	if !ok || v == nil {
		return nil, false
	}
	return v, true
}

func (t *Table) markKnown(key string) {
	for _, k := range t.known {
		if k == key {
			return
		}
	}
	t.known = append(t.known, key)
}

func (t *Table) missing(key, want string) {
	t.Errorf(key, "missing required key; expected %s", want)
}

func (t *Table) wrongType(key, want string, v any) {
	t.Errorf(key, "expected %s, got %s", want, describe(v))
}

// String returns the string value of key, or def when it is absent.
func (t *Table) String(key, def string) string {
	v, ok := t.get(key)
	if !ok {
		return def
	}
	s, ok := v.(string)
	if !ok {
		t.wrongType(key, "a string", v)
		return def
	}
	return s
}

// MustString is String for a required key.
func (t *Table) MustString(key string) (string, bool) {
	if !t.Has(key) {
		t.missing(key, "a string")
		return "", false
	}
	v, _ := t.get(key)
	s, ok := v.(string)
	if !ok {
		t.wrongType(key, "a string", v)
	}
	return s, ok
}

// Bool returns the boolean value of key, or def when it is absent.
func (t *Table) Bool(key string, def bool) bool {
	v, ok := t.get(key)
	if !ok {
		return def
	}
	b, ok := v.(bool)
	if !ok {
		t.wrongType(key, "true or false", v)
		return def
	}
	return b
}

// Int returns the integer value of key, or def when it is absent. It must lie in [min, max].
func (t *Table) Int(key string, def, min, max int64) int64 {
	v, ok := t.get(key)
	if !ok {
		return def
	}
	n, ok := t.intValue(key, v, min, max)
	if !ok {
		return def
	}
	return n
}

// MustInt is Int for a required key.
func (t *Table) MustInt(key string, min, max int64) (int64, bool) {
	v, ok := t.get(key)
	if !ok {
		t.missing(key, "an integer"+rangeText(min, max))
		return 0, false
	}
	return t.intValue(key, v, min, max)
}

func (t *Table) intValue(key string, v any, min, max int64) (int64, bool) {
	n, ok := asInt(v)
	if !ok {
		t.wrongType(key, "an integer"+rangeText(min, max), v)
		return 0, false
	}
	if n < min || n > max {
		t.Errorf(key, "%d is out of range; expected an integer%s", n, rangeText(min, max))
		return 0, false
	}
	return n, true
}

// Float returns the number value of key (an integer is accepted too), or def when it is absent.
func (t *Table) Float(key string, def float64) float64 {
	v, ok := t.get(key)
	if !ok {
		return def
	}
	switch x := v.(type) {
	case float64:
		return x
	case int64:
		return float64(x)
	case json.Number:
		if f, err := x.Float64(); err == nil {
			return f
		}
	}
	t.wrongType(key, "a number", v)
	return def
}

// MustInts returns the value of a required key that holds an array of integers, each in
// [min, max], with at most maxLen elements.
func (t *Table) MustInts(key string, min, max int64, maxLen int) ([]int64, bool) {
	v, ok := t.get(key)
	want := fmt.Sprintf("an array of at most %d integers%s", maxLen, rangeText(min, max))
	if !ok {
		t.missing(key, want)
		return nil, false
	}
	arr, ok := v.([]any)
	if !ok {
		t.wrongType(key, want, v)
		return nil, false
	}
	if len(arr) > maxLen {
		t.Errorf(key, "%d elements; expected %s", len(arr), want)
		return nil, false
	}
	out := make([]int64, len(arr))
	good := true
	for i, e := range arr {
		n, ok := asInt(e)
		if !ok {
			t.Errorf(key, "element %d: expected an integer%s, got %s", i, rangeText(min, max), describe(e))
			good = false
			continue
		}
		if n < min || n > max {
			t.Errorf(key, "element %d: %d is out of range; expected an integer%s", i, n, rangeText(min, max))
			good = false
			continue
		}
		out[i] = n
	}
	return out, good
}

// Floats returns the value of key that holds an array of numbers (integers accepted), or nil
// when it is absent.
func (t *Table) Floats(key string) []float64 {
	v, ok := t.get(key)
	if !ok {
		return nil
	}
	arr, ok := v.([]any)
	if !ok {
		t.wrongType(key, "an array of numbers", v)
		return nil
	}
	out := make([]float64, 0, len(arr))
	for i, e := range arr {
		var f float64
		switch x := e.(type) {
		case float64:
			f = x
		case int64:
			f = float64(x)
		case json.Number:
			var err error
			if f, err = x.Float64(); err != nil {
				ok = false
			}
		default:
			ok = false
		}
		if !ok {
			t.Errorf(key, "element %d: expected a number, got %s", i, describe(e))
			ok = true
			continue
		}
		out = append(out, f)
	}
	return out
}

// Strings returns the value of key that holds an array of strings, or nil when it is absent.
func (t *Table) Strings(key string) []string {
	v, ok := t.get(key)
	if !ok {
		return nil
	}
	arr, ok := v.([]any)
	if !ok {
		t.wrongType(key, "an array of strings", v)
		return nil
	}
	out := make([]string, 0, len(arr))
	for i, e := range arr {
		s, ok := e.(string)
		if !ok {
			t.Errorf(key, "element %d: expected a string, got %s", i, describe(e))
			continue
		}
		out = append(out, s)
	}
	return out
}

// Sub returns the sub-table at key, or nil when it is absent (or not a table, which is
// recorded). The caller must call Done on it when it has read its keys.
func (t *Table) Sub(key string) *Table {
	v, ok := t.get(key)
	if !ok {
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		t.wrongType(key, "a table", v)
		return nil
	}
	return newTable(t.Field(key), m, t.c)
}

// Done reports every key of the table that no getter asked for.
func (t *Table) Done() {
	var unknown []string
	for k := range t.raw {
		found := false
		for _, kk := range t.known {
			if k == kk {
				found = true
				break
			}
		}
		if !found {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	for _, k := range unknown {
		t.Errorf(k, "unknown key; expected one of %s", strings.Join(t.known, ", "))
	}
}

func asInt(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case json.Number:
		n, err := x.Int64()
		return n, err == nil
	}
	return 0, false
}

func rangeText(min, max int64) string {
	switch {
	case min == math.MinInt64 && max == math.MaxInt64:
		return ""
	case max == math.MaxInt64:
		return fmt.Sprintf(" >= %d", min)
	default:
		return fmt.Sprintf(" in %d..%d", min, max)
	}
}

// describe names the type of a decoded value (and the value itself when short) for messages.
func describe(v any) string {
	switch x := v.(type) {
	case string:
		if len(x) > 40 {
			x = x[:40] + "..."
		}
		return fmt.Sprintf("the string %q", x)
	case bool:
		return fmt.Sprintf("the boolean %v", x)
	case int64:
		return fmt.Sprintf("the integer %d", x)
	case float64:
		return fmt.Sprintf("the float %v", x)
	case json.Number:
		return "the number " + x.String()
	case []any, []map[string]any:
		return "an array"
	case map[string]any:
		return "a table"
	case nil:
		return "null"
	default:
		return fmt.Sprintf("a %T", v) // TOML dates and times
	}
}
