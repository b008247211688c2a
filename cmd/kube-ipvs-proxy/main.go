package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/cmd/kube-ipvs-proxy/app"
)

func main() {
	opts, err := app.ParseFlags(os.Args[1:], os.Stderr)
	if err == nil {
		err = opts.Validate()
	}
	if errors.Is(err, pflag.ErrHelp) {
		os.Exit(app.ExitOK)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "kube-ipvs-proxy: %v\n", err)
		os.Exit(app.ExitUsage)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(app.Run(ctx, opts, os.Stdout, os.Stderr))
}
