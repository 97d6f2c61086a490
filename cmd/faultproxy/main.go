// Command faultproxy runs internal/faultproxy in front of a server, for benchmarks and manual
// trials: it prints "listening URL" on its first line of output, serves its counters as JSON at
// /.faultproxy/stats, and runs until killed.
//
//	faultproxy --target http://127.0.0.1:7070 [--listen 127.0.0.1:0] [--delay 30ms]
//	           [--every-503 N] [--every-reset N] [--every-mid-body-reset N]
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/gobatch/gobatch/internal/faultproxy"
)

// statsPath is where the counters are served; a request there is not proxied or counted.
const statsPath = "/.faultproxy/stats"

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "faultproxy:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("faultproxy", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:0", "address to listen on")
	target := fs.String("target", "", "the server's URL (required)")
	var cfg faultproxy.Config
	fs.DurationVar(&cfg.Delay, "delay", 0, "delay before each request is handled, e.g. 30ms")
	fs.Uint64Var(&cfg.Every503, "every-503", 0, "answer every n-th request 503 (0: never)")
	fs.Uint64Var(&cfg.EveryReset, "every-reset", 0, "reset the connection of every n-th request before answering (0: never)")
	fs.Uint64Var(&cfg.EveryMidBody, "every-mid-body-reset", 0, "reset every n-th request's connection halfway through the body (0: never)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *target == "" || fs.NArg() > 0 {
		return fmt.Errorf("usage: faultproxy --target URL [--listen ADDR] [--delay D] [--every-503 N] [--every-reset N] [--every-mid-body-reset N]")
	}
	p, err := faultproxy.Start(*listen, *target, cfg)
	if err != nil {
		return err
	}
	defer p.Close()
	stats := http.NewServeMux()
	stats.HandleFunc(statsPath, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(p.Stats())
	})
	p.Bypass(statsPath, stats)
	fmt.Println("listening", p.URL())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	return nil
}
