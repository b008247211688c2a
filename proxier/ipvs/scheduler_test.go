package ipvs

import (
	"errors"
	"strings"
	"syscall"
	"testing"
)

// TestCheckSchedulerAsKubeProxy holds the start's scheduler check to
// kube-proxy's: any scheduler the kernel has passes ("twos" only from
// Linux 6.2, "none" always), a virtual server already using it is enough,
// anything else fails naming its module, and the kernel is left as it
// was.
func TestCheckSchedulerAsKubeProxy(t *testing.T) {
	tests := []struct {
		name      string
		release   string
		scheduler string
		existing  []VirtualServer
		fault     FaultFunc
		wantErr   string // "": none
		wantOps   string // the kernel calls made
	}{
		{name: "empty is rr, which every kernel has", release: "6.1.0", scheduler: "", wantOps: "list-services add-service delete-service"},
		{name: "mh", release: "6.1.0", scheduler: "mh", wantOps: "list-services add-service delete-service"},
		{name: "none needs no module", release: "6.1.0", scheduler: "none", wantOps: "list-services add-service delete-service"},
		{name: "twos on 6.2", release: "6.2.0", scheduler: "twos", wantOps: "list-services add-service delete-service"},
		{name: "twos before 6.2 names its module", release: "6.1.0", scheduler: "twos",
			wantErr: `IPVS scheduler "twos": the kernel has no such scheduler (module ip_vs_twos)`, wantOps: "list-services add-service"},
		{name: "an unknown name names its module", release: "6.1.0", scheduler: "fastest",
			wantErr: "module ip_vs_fastest", wantOps: "list-services add-service"},
		{name: "a virtual server using it already is enough (a restart)", release: "6.1.0", scheduler: "wlc",
			existing: []VirtualServer{{Key: key("10.96.0.1:443/TCP"), Scheduler: "wlc"}}, wantOps: "list-services"},
		{name: "a probe left by an earlier start is replaced, then deleted", release: "6.1.0", scheduler: "sh",
			existing: []VirtualServer{{Key: schedulerProbe, Scheduler: "rr"}}, wantOps: "list-services add-service delete-service add-service delete-service"},
		{name: "a failed list is an error", release: "6.1.0", scheduler: "rr",
			fault: func(op, _ string) error {
				if op == "list-services" {
					return syscall.EIO
				}
				return nil
			},
			wantErr: `check IPVS scheduler "rr": list the virtual servers`, wantOps: "list-services"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k := NewFakeKernelFor(tc.release)
			for _, vs := range tc.existing {
				if err := k.AddVirtualServer(vs); err != nil {
					t.Fatal(err)
				}
			}
			before := k.Dump()
			if tc.existing != nil && tc.existing[0].Key == schedulerProbe {
				before = ""
			}
			var ops []string
			k.Fault = func(op, target string) error {
				ops = append(ops, op)
				if tc.fault != nil {
					return tc.fault(op, target)
				}
				return nil
			}
			err := checkScheduler(k, tc.scheduler)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("checkScheduler(%q): %v", tc.scheduler, err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("checkScheduler(%q): error %v, want one saying %q", tc.scheduler, err, tc.wantErr)
			}
			if tc.wantErr != "" && strings.Contains(tc.wantErr, "module") && !errors.Is(err, syscall.ENOENT) {
				t.Errorf("error %v does not wrap the kernel's ENOENT", err)
			}
			if got := k.Dump(); got != before {
				t.Errorf("kernel after the check:\n%s\nwant as before:\n%s", got, before)
			}
			if got := strings.Join(ops, " "); got != tc.wantOps {
				t.Errorf("kernel calls %q, want %q", got, tc.wantOps)
			}
		})
	}
}
