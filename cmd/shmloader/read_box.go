package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// errBox is wrapped by every --box error, so callers can report it as a usage error.
var errBox = errors.New("bad --box")

// parseBox parses a --box value against an array shape: one comma-separated item per
// dimension, each START:STOP with either end optional (":" is the whole dimension) or a
// single index I meaning I:I+1 (the dimension is kept). Indices are 0-based, STOP is
// exclusive, negative indices are not allowed. An empty value means the whole array.
func parseBox(s string, shape []int) (start, stop []int, err error) {
	start = make([]int, len(shape))
	stop = append([]int(nil), shape...)
	if strings.TrimSpace(s) == "" {
		return start, stop, nil
	}
	parts := strings.Split(s, ",")
	if len(parts) != len(shape) {
		return nil, nil, fmt.Errorf("%w %q: %d items for an array of %d dimensions %v", errBox, s, len(parts), len(shape), shape)
	}
	for i, p := range parts {
		p = strings.TrimSpace(p)
		lo, hi, isRange := strings.Cut(p, ":")
		if strings.Contains(hi, ":") {
			return nil, nil, fmt.Errorf("%w %q: item %d %q: want START:STOP (steps are not supported)", errBox, s, i, p)
		}
		num := func(t string, def int) (int, error) {
			t = strings.TrimSpace(t)
			if t == "" {
				return def, nil
			}
			v, err := strconv.Atoi(t)
			if err != nil || v < 0 {
				return 0, fmt.Errorf("%w %q: item %d %q: %q is not a non-negative integer", errBox, s, i, p, t)
			}
			return v, nil
		}
		if start[i], err = num(lo, 0); err != nil {
			return nil, nil, err
		}
		if !isRange {
			if lo == "" {
				return nil, nil, fmt.Errorf("%w %q: item %d is empty", errBox, s, i)
			}
			stop[i] = start[i] + 1
		} else if stop[i], err = num(hi, shape[i]); err != nil {
			return nil, nil, err
		}
		if start[i] > stop[i] || stop[i] > shape[i] {
			return nil, nil, fmt.Errorf("%w %q: item %d %d:%d is outside dimension %d of size %d", errBox, s, i, start[i], stop[i], i, shape[i])
		}
	}
	return start, stop, nil
}
