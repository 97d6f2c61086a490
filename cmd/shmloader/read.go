package main

import (
	"fmt"
	"os"
)

func init() {
	register("read", "(not built yet)", func(args []string) int {
		fmt.Fprintln(os.Stderr, "shmloader read: not built yet")
		return exitFailure
	})
}
