//go:build race

package ocf

// raceEnabled: the race detector makes the YAML parser several times slower, so the tests of
// large documents use smaller ones under it (their point, linear work, holds at either size).
const raceEnabled = true
