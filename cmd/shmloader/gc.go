package main

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/gobatch/gobatch/ring"
	"github.com/gobatch/gobatch/shm"
)

func init() {
	register("gc", "remove named rings whose creator is dead and that no live producer or consumer holds", cmdGC)
}

func cmdGC(args []string) int {
	fl := newFlagSet("gc", "")
	dry := fl.Bool("dry-run", false, "print what would be removed; remove nothing")
	grace := fl.Duration("grace", 60*time.Second, "age before a segment without a ring header counts as abandoned")
	asJSON := fl.Bool("json", false, "print the verdict on every segment as JSON lines")
	allowUID := addAllowUIDFlag(fl)
	lf := addLogFlags(fl)
	pos, code, ok := fl.parse(args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return usageError("gc", fmt.Errorf("unexpected argument %q (see shmloader gc -h)", pos[0]))
	}
	log, err := lf.logger("gc")
	if err != nil {
		return usageError("gc", err)
	}
	res, err := ring.GC(ring.GCOptions{Grace: *grace, DryRun: *dry, AllowUID: *allowUID})
	for _, x := range res {
		if *asJSON {
			b, _ := json.Marshal(struct {
				Name    string `json:"name"`
				Path    string `json:"path"`
				Removed bool   `json:"removed"`
				DryRun  bool   `json:"dry_run"`
				Reason  string `json:"reason"`
			}{x.Name, shm.Path(x.Name), x.Removed, *dry, x.Reason})
			fmt.Printf("%s\n", b)
			continue
		}
		switch {
		case x.Removed && *dry:
			fmt.Printf("would remove %s: %s\n", shm.Path(x.Name), x.Reason)
		case x.Removed:
			fmt.Printf("removed %s: %s\n", shm.Path(x.Name), x.Reason)
		default:
			log.Info().Str("path", shm.Path(x.Name)).Str("reason", x.Reason).Msg("kept")
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "shmloader gc: %v\n", err)
		return exitFailure
	}
	return exitOK
}
