package features

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// DateTime returns ocf-data-sampler's datetime encodings of unix time t (seconds, UTC): the
// time of day as an angle, 2π·(hour·60 + minute)/1440 (seconds are ignored), and the date as
// 2π·dayofyear/365 (365 in leap years too, so 31 December of a leap year is past 2π), each as
// sine and cosine.
func DateTime(t int64) (dateSin, dateCos, timeSin, timeCos float64) {
	u := time.Unix(t, 0).UTC()
	date := 2 * math.Pi * float64(u.YearDay()) / 365
	tod := 2 * math.Pi * float64(u.Hour()*60+u.Minute()) / (24 * 60)
	return math.Sin(date), math.Cos(date), math.Sin(tod), math.Cos(tod)
}

// Embedding is one period of ocf-data-sampler's t0 embedding: a period of Hours hours or of
// Years years (one of the two is non-zero), encoded as a sine and a cosine (Cyclic) or as the
// fraction through the period.
type Embedding struct {
	Hours, Years int
	Cyclic       bool
}

// ParseEmbedding reads a t0_embedding entry: period "<N>h" (1 <= N <= 24) or "<N>y" (N > 0),
// kind "cyclic" or "linear".
func ParseEmbedding(period, kind string) (Embedding, error) {
	var e Embedding
	switch kind {
	case "cyclic":
		e.Cyclic = true
	case "linear":
	default:
		return e, fmt.Errorf("kind %q; expected \"cyclic\" or \"linear\"", kind)
	}
	n, err := strconv.Atoi(strings.TrimRight(period, "hy"))
	switch {
	case err != nil || len(period) < 2:
		return e, fmt.Errorf("period %q; expected <N>h or <N>y", period)
	case strings.HasSuffix(period, "h") && n >= 1 && n <= 24:
		e.Hours = n
	case strings.HasSuffix(period, "y") && n > 0:
		e.Years = n
	default:
		return e, fmt.Errorf("period %q; expected <N>h with 1 <= N <= 24 or <N>y with N > 0", period)
	}
	return e, nil
}

// Width is the number of values the embedding contributes: two when cyclic, else one.
func (e Embedding) Width() int {
	if e.Cyclic {
		return 2
	}
	return 1
}

// frac is how far unix time t (UTC) is through the period: (hour + minute/60)/N for hours,
// ((dayofyear - 1)/days in the year + year mod N)/N for years.
func (e Embedding) frac(u time.Time) float64 {
	if e.Hours > 0 {
		return (float64(u.Hour()) + float64(u.Minute())/60) / float64(e.Hours)
	}
	days := 365.0
	if y := u.Year(); y%4 == 0 && (y%100 != 0 || y%400 == 0) {
		days = 366
	}
	return (float64(u.YearDay()-1)/days + float64(pyMod(u.Year(), e.Years))) / float64(e.Years)
}

// pyMod is a mod n with the sign of n, as Python's %.
func pyMod(a, n int) int {
	m := a % n
	if m < 0 {
		m += n
	}
	return m
}

// T0Embedding writes the t0 embedding of unix time t0 for embs, in order, into dst (whose
// length is the sum of their widths), as float32 of the float64 values as ocf-data-sampler
// gives them.
func T0Embedding(dst []float32, t0 int64, embs []Embedding) {
	u := time.Unix(t0, 0).UTC()
	i := 0
	for _, e := range embs {
		f := e.frac(u)
		if e.Cyclic {
			dst[i], dst[i+1] = float32(math.Sin(2*math.Pi*f)), float32(math.Cos(2*math.Pi*f))
		} else {
			dst[i] = float32(f)
		}
		i += e.Width()
	}
}
