package features

import "math"

// DeltaT is the difference between terrestrial time and universal time, in seconds, that
// ocf-data-sampler's solar position uses: pvlib's default for spa_python (67 s), not one
// computed from the date.
const DeltaT = 67.0

// Julian dates of the Unix epoch and of J2000.0, and the lengths the SPA measures time in.
const (
	unixEpochJD   = 2440587.5
	j2000JD       = 2451545.0
	daySeconds    = 86400.0
	julianCentury = 36525.0
)

// Sun returns the sun's topocentric azimuth (degrees east of north, in [0, 360)) and its
// topocentric elevation without atmospheric refraction (degrees) seen at sea level from
// longitude lon and latitude lat (degrees, east and north positive) at unix time t (seconds),
// by the NREL solar position algorithm (Reda & Andreas 2004) with DeltaT. It does not
// allocate.
func Sun(t, lon, lat float64) (azimuth, elevation float64) {
	return SunAt(t).Seen(lon, lat)
}

// Geocentric is the part of the sun's position that depends on the time alone (sections
// 3.1-3.10 of the algorithm): most of its work, shared by every site at that time.
type Geocentric struct {
	r, alpha, delta, nu float64 // distance (AU), right ascension and declination (radians), sidereal time (degrees)
}

// SunAt returns the sun's geocentric position at unix time t (seconds).
func SunAt(t float64) Geocentric {
	jd := t/daySeconds + unixEpochJD
	jde := jd + DeltaT/daySeconds
	jc := (jd - j2000JD) / julianCentury
	jce := (jde - j2000JD) / julianCentury
	jme := jce / 10

	// The earth's heliocentric position (section 3.2) seen from the earth (3.3).
	r := series(jme, termsR0, termsR1, termsR2, termsR3, termsR4)
	theta := mod360(rad2deg(series(jme, termsL0, termsL1, termsL2, termsL3, termsL4, termsL5)) + 180)
	beta := -rad2deg(series(jme, termsB0, termsB1))

	// Nutation and the obliquity of the ecliptic (3.4, 3.5).
	dPsi, dEps := nutation(jce)
	eps := meanObliquity(jme)/3600 + dEps

	// The apparent sun longitude (3.6, 3.7) and sidereal time at Greenwich (3.8).
	lambda := theta + dPsi - 20.4898/(3600*r)
	nu0 := mod360(280.46061837 + 360.98564736629*(jd-j2000JD) + 0.000387933*jc*jc - jc*jc*jc/38710000)
	nu := nu0 + dPsi*math.Cos(deg2rad(eps))

	// Geocentric right ascension and declination (3.9, 3.10).
	alpha, delta := equatorial(deg2rad(lambda), deg2rad(eps), deg2rad(beta))
	return Geocentric{r: r, alpha: alpha, delta: delta, nu: nu}
}

// Seen returns the azimuth and elevation, as Sun gives them, of the sun at g seen from
// longitude lon and latitude lat.
func (g Geocentric) Seen(lon, lat float64) (azimuth, elevation float64) {
	// The local hour angle (3.11); parallax moves the sun to the observer's topocentric
	// position (3.12).
	h := deg2rad(mod360(g.nu + lon - rad2deg(g.alpha)))
	hp, deltaP := topocentric(g.r, deg2rad(lat), h, g.delta)
	phi := deg2rad(lat)
	elevation = rad2deg(math.Asin(math.Sin(phi)*math.Sin(deltaP) + math.Cos(phi)*math.Cos(deltaP)*math.Cos(hp)))
	gamma := math.Atan2(math.Sin(hp), math.Cos(hp)*math.Sin(phi)-math.Tan(deltaP)*math.Cos(phi))
	azimuth = mod360(rad2deg(gamma) + 180)
	return azimuth, elevation
}

// SunCache keeps the geocentric positions of the times last asked for, a few hundred of
// them, by time: the examples of a batch share their times (sites at one t0, windows that
// overlap), so most of Sun's work is done once per time. The zero value is ready; a
// SunCache is one goroutine's (a sampler reader's), and it does not allocate.
type SunCache struct {
	t  [sunSlots]int64
	ok [sunSlots]bool
	g  [sunSlots]Geocentric
}

const sunSlots = 512

// At returns SunAt(t) for unix time t (seconds).
func (c *SunCache) At(t int64) Geocentric {
	i := uint64(t) / 60 % sunSlots // minutes: times on a grid of minutes spread over the slots
	if !c.ok[i] || c.t[i] != t {
		c.t[i], c.ok[i], c.g[i] = t, true, SunAt(float64(t))
	}
	return c.g[i]
}

// series sums the earth periodic terms of one quantity (L, B or R): Σ_i jme^i Σ A cos(B + C jme),
// over 10^8, in radians (L, B) or astronomical units (R).
func series(jme float64, rows ...[][3]float64) float64 {
	sum, pow := 0.0, 1.0
	for _, terms := range rows {
		s := 0.0
		for _, t := range terms {
			s += t[0] * math.Cos(t[1]+t[2]*jme)
		}
		sum += s * pow
		pow *= jme
	}
	return sum / 1e8
}

// nutation is the nutation in longitude and in obliquity (degrees) at jce Julian ephemeris
// centuries since J2000.0.
func nutation(jce float64) (dPsi, dEps float64) {
	x := [5]float64{
		poly3(jce, 297.85036, 445267.111480, -0.0019142, 1.0/189474), // mean elongation of the moon from the sun
		poly3(jce, 357.52772, 35999.050340, -0.0001603, -1.0/300000), // mean anomaly of the sun
		poly3(jce, 134.96298, 477198.867398, 0.0086972, 1.0/56250),   // mean anomaly of the moon
		poly3(jce, 93.27191, 483202.017538, -0.0036825, 1.0/327270),  // the moon's argument of latitude
		poly3(jce, 125.04452, -1934.136261, 0.0020708, 1.0/450000),   // longitude of the moon's ascending node
	}
	for i, y := range nutationY {
		arg := deg2rad(y[0]*x[0] + y[1]*x[1] + y[2]*x[2] + y[3]*x[3] + y[4]*x[4])
		c := nutationABCD[i]
		dPsi += (c[0] + c[1]*jce) * math.Sin(arg)
		dEps += (c[2] + c[3]*jce) * math.Cos(arg)
	}
	return dPsi / 36e6, dEps / 36e6
}

func poly3(x, a, b, c, d float64) float64 { return a + x*(b+x*(c+x*d)) }

// meanObliquity is the mean obliquity of the ecliptic in arcseconds (equation 24), with
// U = jme / 10.
func meanObliquity(jme float64) float64 {
	coef := [...]float64{84381.448, -4680.93, -1.55, 1999.25, -51.38, -249.67, -39.05, 7.12, 27.87, 5.79, 2.45}
	u := jme / 10
	e := 0.0
	for i := len(coef) - 1; i >= 0; i-- {
		e = e*u + coef[i]
	}
	return e
}

// equatorial turns the apparent ecliptic longitude and latitude into right ascension and
// declination (radians) for obliquity eps.
func equatorial(lambda, eps, beta float64) (alpha, delta float64) {
	alpha = math.Atan2(math.Sin(lambda)*math.Cos(eps)-math.Tan(beta)*math.Sin(eps), math.Cos(lambda))
	if alpha < 0 {
		alpha += 2 * math.Pi
	}
	delta = math.Asin(math.Sin(beta)*math.Cos(eps) + math.Cos(beta)*math.Sin(eps)*math.Sin(lambda))
	return alpha, delta
}

// topocentric corrects the hour angle h and declination delta (radians) for the parallax of
// an observer at sea level at latitude phi (radians), r astronomical units from the sun.
func topocentric(r, phi, h, delta float64) (hp, deltaP float64) {
	xi := deg2rad(8.794 / (3600 * r)) // the sun's equatorial horizontal parallax
	u := math.Atan(0.99664719 * math.Tan(phi))
	x := math.Cos(u)
	y := 0.99664719 * math.Sin(u)
	den := math.Cos(delta) - x*math.Sin(xi)*math.Cos(h)
	dAlpha := math.Atan2(-x*math.Sin(xi)*math.Sin(h), den)
	deltaP = math.Atan2((math.Sin(delta)-y*math.Sin(xi))*math.Cos(dAlpha), den)
	return h - dAlpha, deltaP
}

func deg2rad(d float64) float64 { return d * (math.Pi / 180) }
func rad2deg(r float64) float64 { return r * (180 / math.Pi) }

// mod360 reduces an angle in degrees into [0, 360).
func mod360(d float64) float64 {
	d = math.Mod(d, 360)
	if d < 0 {
		d += 360
	}
	return d
}

// SunNormalised is Sun scaled as ocf-data-sampler scales it for PVNet: azimuth / 360 and
// elevation / 180 + 0.5, both in [0, 1].
func SunNormalised(t, lon, lat float64) (azimuth, elevation float64) {
	return Normalised(Sun(t, lon, lat))
}

// Normalised scales an azimuth and elevation as SunNormalised does.
func Normalised(azimuth, elevation float64) (float64, float64) {
	return azimuth / 360, elevation/180 + 0.5
}
