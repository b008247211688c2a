// Command etcd runs a single-member etcd (go.etcd.io/etcd/server/v3/embed)
// for the integration harness: plain HTTP on loopback, no TLS, no auth. It
// runs until SIGTERM or SIGINT, then closes the server cleanly.
package main

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "etcd: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	dataDir := flag.String("data-dir", "", "data directory (required)")
	client := flag.String("listen-client-url", "http://127.0.0.1:2379", "client URL to listen on and advertise")
	peer := flag.String("listen-peer-url", "http://127.0.0.1:2380", "peer URL to listen on and advertise")
	name := flag.String("name", "default", "member name")
	noFsync := flag.Bool("unsafe-no-fsync", false, "do not fsync (tests only: faster, loses data on a machine crash)")
	logLevel := flag.String("log-level", "warn", "zap log level: debug, info, warn, error")
	flag.Parse()
	if *dataDir == "" {
		return fmt.Errorf("--data-dir is required")
	}
	cfg, err := config(*dataDir, *name, *client, *peer)
	if err != nil {
		return err
	}
	cfg.UnsafeNoFsync = *noFsync
	cfg.LogLevel = *logLevel

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("start etcd: %w", err)
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
		fmt.Fprintf(os.Stderr, "etcd: ready, serving clients on %s\n", *client)
	case <-time.After(60 * time.Second):
		e.Server.Stop()
		return fmt.Errorf("etcd took more than 60s to become ready")
	}

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case s := <-sig:
		fmt.Fprintf(os.Stderr, "etcd: %v, shutting down\n", s)
		return nil
	case err := <-e.Err():
		return fmt.Errorf("etcd server: %w", err)
	}
}

// config is a single-member cluster whose client and peer URLs are both
// listened on and advertised.
func config(dataDir, name, client, peer string) (*embed.Config, error) {
	cu, err := url.Parse(client)
	if err != nil {
		return nil, fmt.Errorf("parse --listen-client-url %q: %w", client, err)
	}
	pu, err := url.Parse(peer)
	if err != nil {
		return nil, fmt.Errorf("parse --listen-peer-url %q: %w", peer, err)
	}
	cfg := embed.NewConfig()
	cfg.Name = name
	cfg.Dir = dataDir
	cfg.ListenClientUrls = []url.URL{*cu}
	cfg.AdvertiseClientUrls = []url.URL{*cu}
	cfg.ListenPeerUrls = []url.URL{*pu}
	cfg.AdvertisePeerUrls = []url.URL{*pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(name)
	cfg.Logger = "zap"
	cfg.LogOutputs = []string{"stderr"}
	return cfg, nil
}
