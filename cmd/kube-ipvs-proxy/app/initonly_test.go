package app

import (
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier"
)

// mapSysctls is sysctl.Files over a map: a missing file is
// fs.ErrNotExist, for a read and a write, as in /proc/sys.
type mapSysctls struct {
	m      map[string]string
	writes []string
}

func (f *mapSysctls) Read(path string) (string, error) {
	v, ok := f.m[path]
	if !ok {
		return "", fmt.Errorf("open %s: %w", path, fs.ErrNotExist)
	}
	return v, nil
}

func (f *mapSysctls) Write(path, value string) error {
	if _, ok := f.m[path]; !ok {
		return fmt.Errorf("open %s: %w", path, fs.ErrNotExist)
	}
	f.m[path] = value
	f.writes = append(f.writes, strings.TrimPrefix(path, "/proc/sys/net/netfilter/")+"="+value)
	return nil
}

func conntrackLoaded() map[string]string {
	return map[string]string{
		"/proc/sys/net/netfilter/nf_conntrack_max":                     "131072", // kube-proxy's defaults on 2 CPUs
		"/proc/sys/net/netfilter/nf_conntrack_tcp_timeout_established": "432000",
		"/proc/sys/net/netfilter/nf_conntrack_tcp_timeout_close_wait":  "3600",
		"/sys/module/nf_conntrack/parameters/hashsize":                 "262144",
		"/sys/devices/system/cpu/online":                               "0-1",
	}
}

// TestInitOnlyInitialisesTheNodeAndExits: --init-only does kube-proxy's
// privileged initialisation (the IPVS check, sysctls and timeouts with
// the configured scheduler and values, then the conntrack sysctls) and
// exits 0; a node that lacks IPVS or nf_conntrack fails it, naming what
// is missing; values already set are not written again.
func TestInitOnlyInitialisesTheNodeAndExits(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		ipvsErr    error
		sysctls    map[string]string
		wantCode   int
		wantIPVS   proxier.DataPlaneConfig // the fields checked: Scheduler, StrictARP, TCPTimeout
		wantWrites []string
		wantStderr string
	}{
		{name: "the IPVS side with the configured scheduler and values, then conntrack",
			args:     []string{"--ipvs-scheduler", "twos", "--ipvs-strict-arp", "--ipvs-tcp-timeout", "900s", "--conntrack-tcp-timeout-established", "86400s"},
			sysctls:  conntrackLoaded(),
			wantCode: ExitOK, wantIPVS: proxier.DataPlaneConfig{Scheduler: "twos", StrictARP: true, TCPTimeout: 900 * time.Second},
			wantWrites: []string{"nf_conntrack_tcp_timeout_established=86400"}},
		{name: "values already set are not written",
			args:     []string{"--conntrack-tcp-timeout-established", "432000s"},
			sysctls:  conntrackLoaded(),
			wantCode: ExitOK},
		{name: "a kernel without IPVS fails, conntrack untouched",
			args:     []string{"--conntrack-tcp-timeout-established", "86400s"},
			ipvsErr:  fmt.Errorf("open ipvs: the kernel has no IPVS generic netlink family (load module ip_vs): %w", syscall.ENOENT),
			sysctls:  conntrackLoaded(),
			wantCode: ExitError, wantStderr: "--init-only: open ipvs: the kernel has no IPVS generic netlink family (load module ip_vs)"},
		{name: "nf_conntrack not loaded fails, naming it",
			args:     []string{"--conntrack-tcp-timeout-established", "86400s"},
			sysctls:  map[string]string{},
			wantCode: ExitError, wantStderr: "set the conntrack sysctls from the configuration: nf_conntrack is not loaded"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []proxier.DataPlaneConfig
			files := &mapSysctls{m: tc.sysctls}
			defer func(saved nodeInit) { hostInit = saved }(hostInit)
			hostInit = nodeInit{
				ipvs:    func(c proxier.DataPlaneConfig) error { got = append(got, c); return tc.ipvsErr },
				sysctls: files,
			}
			code, out, errOut := run(t, append(tc.args, "--init-only", "--hostname-override", "n")...)
			if code != tc.wantCode || out != "" || !strings.Contains(errOut, tc.wantStderr) {
				t.Fatalf("exit %d stdout %q stderr %q, want exit %d and stderr with %q", code, out, errOut, tc.wantCode, tc.wantStderr)
			}
			if len(got) != 1 {
				t.Fatalf("the IPVS initialisation ran %d times, want once", len(got))
			}
			if c := got[0]; c.Scheduler != tc.wantIPVS.Scheduler || c.StrictARP != tc.wantIPVS.StrictARP || c.TCPTimeout != tc.wantIPVS.TCPTimeout {
				t.Errorf("IPVS initialised with scheduler %q strictARP %v tcpTimeout %v, want %q %v %v",
					c.Scheduler, c.StrictARP, c.TCPTimeout, tc.wantIPVS.Scheduler, tc.wantIPVS.StrictARP, tc.wantIPVS.TCPTimeout)
			}
			if !slices.Equal(files.writes, tc.wantWrites) {
				t.Errorf("sysctl writes %q, want %q", files.writes, tc.wantWrites)
			}
		})
	}
}
