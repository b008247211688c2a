package conntrack

import (
	"errors"
	"fmt"
	"io/fs"
	"runtime"
	"strconv"
	"strings"
	"time"

	"k8s.io/klog/v2"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/sysctl"
)

// The files Apply writes: netfilter's sysctls (per network namespace;
// they exist once nf_conntrack is loaded) and the module's hash table
// size (global).
const (
	sysctlDir    = "/proc/sys/net/netfilter/"
	hashsizeFile = "/sys/module/nf_conntrack/parameters/hashsize"
	cpusOnline   = "/sys/devices/system/cpu/online"
)

// maxLimit caps a scaled nf_conntrack_max, as kube-proxy does, so that a
// machine with many cores does not spend gigabytes on the table.
const maxLimit = 1 << 20

// Settings are the conntrack values to set (kube-proxy's
// KubeProxyConntrackConfiguration); a zero field leaves its sysctl as it
// is.
type Settings struct {
	// MaxPerCore and Min give nf_conntrack_max (MaxFor, with the online
	// CPUs); the hash table is grown to a quarter of it when smaller.
	MaxPerCore, Min       int32
	TCPEstablishedTimeout time.Duration // nf_conntrack_tcp_timeout_established
	TCPCloseWaitTimeout   time.Duration // nf_conntrack_tcp_timeout_close_wait
	TCPBeLiberal          bool          // nf_conntrack_tcp_be_liberal = 1
	UDPTimeout            time.Duration // nf_conntrack_udp_timeout
	UDPStreamTimeout      time.Duration // nf_conntrack_udp_timeout_stream
}

// MaxFor is kube-proxy's nf_conntrack_max: maxPerCore × cpus, at least
// floor, at most 1,048,576; 0 (leave it) when maxPerCore is not positive.
func MaxFor(maxPerCore, floor int32, cpus int) int {
	if maxPerCore <= 0 {
		return 0
	}
	scaled := int(maxPerCore) * cpus
	switch {
	case scaled > maxLimit:
		return maxLimit
	case scaled > int(floor):
		return scaled
	}
	return int(floor)
}

// CPUs counts the online CPUs from /sys (the machine's, not the
// process's cpuset, as kube-proxy counts them), or runtime.NumCPU when
// that file cannot be read.
func CPUs(f sysctl.Files) int {
	s, err := f.Read(cpusOnline)
	if err != nil {
		return runtime.NumCPU()
	}
	n, ok := countCPUList(s)
	if !ok || n < 1 {
		return runtime.NumCPU()
	}
	return n
}

// countCPUList counts the CPUs of a kernel CPU list such as "0-3,8,10-11".
func countCPUList(s string) (int, bool) {
	n := 0
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return 0, false
		}
		b := a
		if isRange {
			// A range wider than any machine is a misread file (and
			// would overflow the count).
			if b, err = strconv.Atoi(hi); err != nil || b < a || b-a > 1<<16 {
				return 0, false
			}
		}
		n += b - a + 1
	}
	return n, true
}

// ErrNotLoaded is wrapped by Apply's error when netfilter's conntrack
// sysctls do not exist yet: nf_conntrack is not loaded. The caller may
// try again once something loaded it (our nftables table does).
var ErrNotLoaded = errors.New("nf_conntrack is not loaded (no " + sysctlDir + "nf_conntrack_max)")

// Apply sets every sysctl of s that differs from the kernel's, logging
// each change. It stops at the first failure, which names the file.
func Apply(logger klog.Logger, f sysctl.Files, s Settings) error {
	if _, err := f.Read(sysctlDir + "nf_conntrack_max"); errors.Is(err, fs.ErrNotExist) {
		return ErrNotLoaded
	}
	if max := MaxFor(s.MaxPerCore, s.Min, CPUs(f)); max > 0 {
		if err := set(logger, f, sysctlDir+"nf_conntrack_max", max); err != nil {
			return err
		}
		if err := growHashsize(logger, f, max/4); err != nil {
			return err
		}
	}
	seconds := []struct {
		name string
		d    time.Duration
	}{
		{"nf_conntrack_tcp_timeout_established", s.TCPEstablishedTimeout},
		{"nf_conntrack_tcp_timeout_close_wait", s.TCPCloseWaitTimeout},
		{"nf_conntrack_udp_timeout", s.UDPTimeout},
		{"nf_conntrack_udp_timeout_stream", s.UDPStreamTimeout},
	}
	for _, e := range seconds {
		if e.d > 0 {
			if err := set(logger, f, sysctlDir+e.name, int(e.d/time.Second)); err != nil {
				return err
			}
		}
	}
	if s.TCPBeLiberal {
		return set(logger, f, sysctlDir+"nf_conntrack_tcp_be_liberal", 1)
	}
	return nil
}

// set writes value to path unless it holds it already.
func set(logger klog.Logger, f sysctl.Files, path string, value int) error {
	if cur, err := f.Read(path); err == nil && cur == strconv.Itoa(value) {
		return nil
	}
	logger.Info("Set sysctl", "entry", strings.TrimPrefix(path, "/proc/sys/"), "value", value)
	if err := f.Write(path, strconv.Itoa(value)); err != nil {
		return fmt.Errorf("set %s to %d: %w", path, value, err)
	}
	return nil
}

// growHashsize makes the conntrack hash table at least size buckets; it
// never shrinks it.
func growHashsize(logger klog.Logger, f sysctl.Files, size int) error {
	s, err := f.Read(hashsizeFile)
	if err != nil {
		return fmt.Errorf("read %s: %w", hashsizeFile, err)
	}
	cur, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("read %s: %q is not a number", hashsizeFile, s)
	}
	if cur >= size {
		return nil
	}
	logger.Info("Setting conntrack hashsize", "conntrackHashsize", size)
	if err := f.Write(hashsizeFile, strconv.Itoa(size)); err != nil {
		return fmt.Errorf("set %s to %d: %w", hashsizeFile, size, err)
	}
	return nil
}
