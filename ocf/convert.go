package ocf

import (
	"math"
	"strconv"
	"strings"
)

// pydantic 2's lax conversions of a YAML value to a field's type. Each returns ok false with
// what pydantic would say.

func asInt(v *value) (int64, string) {
	switch v.kind {
	case kInt:
		return v.i, ""
	case kBool:
		if v.b {
			return 1, ""
		}
		return 0, ""
	case kFloat:
		if math.IsNaN(v.f) || math.IsInf(v.f, 0) {
			return 0, "expected a finite integer"
		}
		if v.f != math.Trunc(v.f) {
			return 0, "expected an integer, got a number with a fractional part"
		}
		if math.Abs(v.f) > 1<<62 {
			return 0, "expected an integer in range"
		}
		return int64(v.f), ""
	case kStr:
		s := digitsOnly(strings.TrimSpace(v.s))
		if i, err := strconv.ParseInt(strings.TrimPrefix(s, "+"), 10, 64); err == nil && !strings.HasPrefix(s, "+-") {
			return i, ""
		}
		if f, err := strconv.ParseFloat(s, 64); err == nil && f == math.Trunc(f) && !math.IsInf(f, 0) && strings.Contains(s, ".") && !strings.ContainsAny(s, "eE") {
			return int64(f), "" // "5.0"
		}
		return 0, "expected an integer, unable to parse the string " + v.shown()
	}
	return 0, "expected an integer, got " + v.kind.String()
}

func asFloat(v *value) (float64, string) {
	switch v.kind {
	case kInt:
		return float64(v.i), ""
	case kFloat:
		return v.f, ""
	case kBool:
		if v.b {
			return 1, ""
		}
		return 0, ""
	case kStr:
		s := digitsOnly(strings.TrimSpace(v.s))
		if f, err := strconv.ParseFloat(s, 64); err == nil && !strings.HasPrefix(strings.ToLower(strings.TrimLeft(s, "+-")), "0x") {
			return f, ""
		}
		return 0, "expected a number, unable to parse the string " + v.shown()
	}
	return 0, "expected a number, got " + v.kind.String()
}

func asStr(v *value) (string, string) {
	if v.kind == kStr {
		return v.s, ""
	}
	return "", "expected a string, got " + v.kind.String()
}

func asBool(v *value) (bool, string) {
	switch v.kind {
	case kBool:
		return v.b, ""
	case kInt:
		if v.i == 0 || v.i == 1 {
			return v.i == 1, ""
		}
	case kFloat:
		if v.f == 0 || v.f == 1 {
			return v.f == 1, ""
		}
	case kStr:
		switch strings.ToLower(strings.TrimSpace(v.s)) {
		case "0", "off", "f", "false", "n", "no":
			return false, ""
		case "1", "on", "t", "true", "y", "yes":
			return true, ""
		}
	}
	return false, "expected a boolean, got " + v.kind.String() + " " + v.shown()
}

// digitsOnly drops the underscores Python allows between digits ("1_000"); other underscores
// are kept, so that the number does not parse.
func digitsOnly(s string) string {
	if !strings.Contains(s, "_") {
		return s
	}
	isDigit := func(i int) bool { return i >= 0 && i < len(s) && s[i] >= '0' && s[i] <= '9' }
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '_' && isDigit(i-1) && isDigit(i+1) {
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
