//go:build race

package blosc

func init() { raceEnabled = true }
