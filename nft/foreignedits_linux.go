package nft

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/nlfamily"
)

// WatchForeignEdits feeds f the kernel's nftables notifications until ctx
// ends. It fails only if the notification socket cannot be opened; later
// socket errors are recorded in f as lost notifications (an edit may have
// been missed), and an error other than a full buffer ends the watch, so
// that edits wait for the periodic repair again.
func WatchForeignEdits(ctx context.Context, f *ForeignEdits) error {
	c, err := netlink.Dial(unix.NETLINK_NETFILTER, nil)
	if err != nil {
		return nlfamily.Error("nftables notifications", unix.NETLINK_NETFILTER, err)
	}
	if err := c.JoinGroup(unix.NFNLGRP_NFTABLES); err != nil {
		_ = c.Close()
		return fmt.Errorf("join the nftables notification group: %w", err)
	}
	// A rebuild of a large table is one notification per element: the
	// buffer that holds its acknowledgements holds them too.
	if err := largeBuffers(c); err != nil {
		_ = c.Close()
		return err
	}
	go func() {
		<-ctx.Done()
		_ = c.Close()
	}()
	go func() {
		for {
			msgs, err := c.Receive()
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				f.Lost(err)
				if errors.Is(err, unix.ENOBUFS) {
					continue
				}
				return
			}
			for _, m := range msgs {
				if err := f.Observe(m); err != nil {
					f.Lost(err)
				}
			}
		}
	}()
	return nil
}

// SelfName is this process's command name as the kernel records it
// (/proc/self/comm), which NewForeignEdits compares with the committer
// of each transaction.
func SelfName() (string, error) {
	b, err := os.ReadFile("/proc/self/comm")
	if err != nil {
		return "", fmt.Errorf("read our command name: %w", err)
	}
	return strings.TrimSuffix(string(b), "\n"), nil
}
