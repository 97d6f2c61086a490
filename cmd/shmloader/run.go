package main

import (
	"fmt"
	"os"
)

func init() {
	register("run", "(not built yet)", func(args []string) int {
		fmt.Fprintln(os.Stderr, "shmloader run: not built yet")
		return exitFailure
	})
}
