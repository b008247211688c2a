//go:build integration && linux

package vme2e

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// netmods is where hack/vmlab/run.sh (VMLAB_NET=user) puts the virtio-net
// modules and their load order.
const netmods = "/vmlab/netmods"

// BringUpNetwork brings up lo (the proxy's healthz and metrics listen on
// 127.0.0.1), loads the virtio-net modules, waits for eth0 and gives it
// the guest's address and a default route via qemu's gateway.
func BringUpNetwork() error {
	lo, err := netlink.LinkByName("lo")
	if err == nil {
		err = netlink.LinkSetUp(lo)
	}
	if err != nil {
		return fmt.Errorf("lo up: %w", err)
	}
	order, err := os.ReadFile(filepath.Join(netmods, "order"))
	if err != nil {
		return fmt.Errorf("no virtio-net modules (boot with VMLAB_NET=user): %w", err)
	}
	for _, name := range strings.Fields(string(order)) {
		if err := loadModule(filepath.Join(netmods, name)); err != nil {
			return err
		}
	}
	var eth0 netlink.Link
	deadline := time.Now().Add(10 * time.Second)
	for eth0 == nil {
		if eth0, err = netlink.LinkByName("eth0"); err != nil && time.Now().After(deadline) {
			return fmt.Errorf("eth0 never appeared: %w", err)
		}
		if eth0 == nil {
			time.Sleep(50 * time.Millisecond)
		}
	}
	addr, err := netlink.ParseAddr(guestAddr)
	if err != nil {
		return err
	}
	if err := netlink.AddrAdd(eth0, addr); err != nil {
		return fmt.Errorf("add %s to eth0: %w", guestAddr, err)
	}
	if err := netlink.LinkSetUp(eth0); err != nil {
		return fmt.Errorf("eth0 up: %w", err)
	}
	gw := netip.MustParseAddr(hostFromGuest)
	if err := netlink.RouteAdd(&netlink.Route{LinkIndex: eth0.Attrs().Index, Gw: net.IP(gw.AsSlice())}); err != nil {
		return fmt.Errorf("default route via %s: %w", gw, err)
	}
	return nil
}

// loadModule loads a module file with finit_module; one already loaded
// is fine.
func loadModule(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.FinitModule(int(f.Fd()), "", 0); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("load module %s: %w", filepath.Base(path), err)
	}
	return nil
}
