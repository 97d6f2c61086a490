package config_test

import (
	"strings"
	"testing"
	"time"

	. "github.com/gobatch/gobatch/config"
)

// [batch] t0_start and t0_end: ISO 8601 times (strings in TOML or JSON, or TOML date-times),
// in UTC when no zone is given, refused naming the key and its line.

const t0Head = "[batch]\nsize = 2\n%s\n[[source]]\nname = \"x\"\nkind = \"synthetic\"\nshape = [2]\ndtype = \"uint8\"\n"

func TestT0BoundsParse(t *testing.T) {
	utc := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v.UTC()
	}
	for _, c := range []struct {
		text, json string
		start, end string // RFC 3339; "" = absent
	}{
		{text: `t0_start = "2021-06-01T00:00:00Z"`, start: "2021-06-01T00:00:00Z"},
		{text: `t0_start = "2021-06-01"` + "\n" + `t0_end = "2021-06-30 23:55"`, start: "2021-06-01T00:00:00Z", end: "2021-06-30T23:55:00Z"},
		{text: `t0_end = "2021-06-01T02:30:00+02:00"`, end: "2021-06-01T00:30:00Z"},
		{text: `t0_end = "2021-06-01T02:30:00.5"`, end: "2021-06-01T02:30:00.5Z"},
		{text: `t0_start = "2021-06-01T06:00Z"`, start: "2021-06-01T06:00:00Z"},
		{text: "t0_start = 2021-06-01T06:00:00+01:00\nt0_end = 2021-07-01", start: "2021-06-01T05:00:00Z", end: "2021-07-01T00:00:00Z"},
		{text: "t0_start = 2021-06-01T06:00:00", start: "2021-06-01T06:00:00Z"},
		{json: `{"batch": {"size": 2, "t0_start": "2021-06-01T00:00:00Z", "t0_end": "2021-06-02"},
		  "source": [{"name": "x", "kind": "synthetic", "shape": [2], "dtype": "uint8"}]}`,
			start: "2021-06-01T00:00:00Z", end: "2021-06-02T00:00:00Z"},
	} {
		var cfg *Config
		var err error
		if c.json != "" {
			cfg, err = Parse("t.json", []byte(c.json), JSON)
		} else {
			cfg, err = Parse("t.toml", []byte(strings.Replace(t0Head, "%s", c.text, 1)), TOML)
		}
		if err != nil {
			t.Fatalf("%s%s: %v", c.text, c.json, err)
		}
		if len(cfg.Batch.Periods) != 1 {
			t.Fatalf("%s%s: periods %v, want one", c.text, c.json, cfg.Batch.Periods)
		}
		p := cfg.Batch.Periods[0]
		for _, b := range []struct {
			got  *time.Time
			want string
		}{{p.Start, c.start}, {p.End, c.end}} {
			switch {
			case b.want == "" && b.got != nil:
				t.Errorf("%s: got %v, want none", c.text, b.got)
			case b.want != "" && (b.got == nil || !b.got.Equal(utc(b.want)) || b.got.Location() != time.UTC):
				t.Errorf("%s: got %v, want %s", c.text, b.got, b.want)
			}
		}
	}
}

func TestT0BoundsErrors(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{`t0_start = "2021-13-01"`, `t.toml:3: batch.t0_start: "2021-13-01" is not an ISO 8601 time`},
		{`t0_end = "June 2021"`, `t.toml:3: batch.t0_end: "June 2021" is not an ISO 8601 time`},
		{`t0_end = 1622505600`, `t.toml:3: batch.t0_end: expected an ISO 8601 time`},
		{"t0_start = 12:00:00", `t.toml:3: batch.t0_start: a time of day without a date`},
		{"t0_start = \"2021-06-02\"\nt0_end = \"2021-06-01T23:59:59Z\"", `t.toml:4: batch.t0_end: 2021-06-01T23:59:59Z is before t0_start (2021-06-02T00:00:00Z)`},
		{`t0_begin = "2021-06-01"`, `t0_begin`},
	} {
		_, err := Parse("t.toml", []byte(strings.Replace(t0Head, "%s", c.text, 1)), TOML)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.text, err, c.want)
		}
	}
}

// [batch] time_periods: a list of [start, end] ranges ("" an open end), as ocf-data-sampler's
// and PVNet's time_periods; refused naming the key with t0_start or t0_end, or malformed.
func TestTimePeriods(t *testing.T) {
	cfg, err := Parse("t.toml", []byte(strings.Replace(t0Head, "%s", `time_periods = [["2021-06-01", "2021-06-30"], ["2022-01-01T06:00Z", ""]]`, 1)), TOML)
	if err != nil {
		t.Fatal(err)
	}
	ps := cfg.Batch.Periods
	if len(ps) != 2 || cfg.Batch.PeriodsKey != "time_periods" || ps[0].Start.Format(time.RFC3339) != "2021-06-01T00:00:00Z" ||
		ps[0].End.Format(time.RFC3339) != "2021-06-30T00:00:00Z" || ps[1].Start.Format(time.RFC3339) != "2022-01-01T06:00:00Z" || ps[1].End != nil {
		t.Fatalf("periods %+v (%s)", ps, cfg.Batch.PeriodsKey)
	}
	for _, c := range []struct{ text, want string }{
		{"time_periods = [[\"2021-06-01\", \"\"]]\nt0_start = \"2021-06-01\"", "batch.time_periods: given with t0_start or t0_end"},
		{`time_periods = []`, "batch.time_periods: "},
		{`time_periods = [["2021-06-01"]]`, "batch.time_periods: element 0 is"},
		{`time_periods = [["2021-06-02", "2021-06-01"]]`, "batch.time_periods: element 0: 2021-06-01T00:00:00Z is before 2021-06-02T00:00:00Z"},
		{`time_periods = [["", "June"]]`, `batch.time_periods: element 0: "June" is not an ISO 8601 time`},
	} {
		_, err := Parse("t.toml", []byte(strings.Replace(t0Head, "%s", c.text, 1)), TOML)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.text, err, c.want)
		}
	}
}
