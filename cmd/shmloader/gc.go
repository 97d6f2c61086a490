package main

import (
	"fmt"
	"os"
)

func init() {
	register("gc", "(not built yet)", func(args []string) int {
		fmt.Fprintln(os.Stderr, "shmloader gc: not built yet")
		return exitFailure
	})
}
