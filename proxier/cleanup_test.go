package proxier

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestCleanReportsWhatItRemoves: in a fresh process, Clean lists our
// virtual servers (the ClusterIP on kube-ipvs0, the recorded NodePort),
// the dummy interface and the table, and removes them; with dryRun it
// lists the same and changes nothing; a second run finds nothing.
func TestCleanReportsWhatItRemoves(t *testing.T) {
	ours := []string{"ipvs virtual server 10.96.0.1:80/TCP", "ipvs virtual server " + recordedNodePort,
		"interface kube-ipvs0", "nftables table inet kube-ipvs-proxy"}
	foreign := []string{"192.168.100.1:22/TCP", "192.168.100.1:30080/UDP"}
	tests := []struct {
		name      string
		dryRun    bool
		wantVSs   []string // the kernel's afterwards
		wantTable bool
	}{
		{name: "cleanup removes and lists ours", wantVSs: foreign},
		{name: "a dry run lists ours and changes nothing", dryRun: true,
			wantVSs: []string{"10.96.0.1:80/TCP", "192.168.100.1:22/TCP", recordedNodePort, "192.168.100.1:30080/UDP"}, wantTable: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakes(t)
			if err := f.dp.Resync(webWithNodePort("10.244.1.5")); err != nil {
				t.Fatalf("Resync: %v", err)
			}
			f.addForeign(t)
			f.restart()
			removed, err := f.dp.Clean(tc.dryRun)
			if err != nil {
				t.Fatalf("Clean: %v", err)
			}
			if diff := cmp.Diff(ours, removed.Lines()); diff != "" {
				t.Errorf("listed (-want +got):\n%s", diff)
			}
			got := f.virtualServers(t)
			slices.Sort(got)
			want := slices.Sorted(slices.Values(tc.wantVSs))
			if !slices.Equal(got, want) {
				t.Errorf("virtual servers afterwards: %v, want %v", got, want)
			}
			if f.hasTable() != tc.wantTable {
				t.Errorf("table exists %t, want %t", f.hasTable(), tc.wantTable)
			}
			if tc.dryRun {
				return
			}
			f.restart()
			again, err := f.dp.Clean(false)
			if err != nil || len(again.Lines()) != 0 {
				t.Errorf("second Clean: %v, %v; want nothing listed", again.Lines(), err)
			}
		})
	}
}
