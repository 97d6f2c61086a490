package main

import (
	"fmt"
	"os"
)

func init() {
	register("version", "(not built yet)", func(args []string) int {
		fmt.Fprintln(os.Stderr, "shmloader version: not built yet")
		return exitFailure
	})
}
