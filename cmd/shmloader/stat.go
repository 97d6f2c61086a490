package main

import (
	"fmt"
	"os"
)

func init() {
	register("stat", "(not built yet)", func(args []string) int {
		fmt.Fprintln(os.Stderr, "shmloader stat: not built yet")
		return exitFailure
	})
}
