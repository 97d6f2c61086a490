//go:build !race

package ocf

const raceEnabled = false
