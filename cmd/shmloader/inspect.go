package main

import (
	"fmt"
	"os"
)

func init() {
	register("inspect", "(not built yet)", func(args []string) int {
		fmt.Fprintln(os.Stderr, "shmloader inspect: not built yet")
		return exitFailure
	})
}
