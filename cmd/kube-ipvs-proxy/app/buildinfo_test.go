package app

import (
	"bytes"
	"strings"
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/metrics"
)

// TestBuildInfoIsServedOnceWithTheStampedVersion: /metrics (our registry
// and component-base's, as served) holds kubernetes_build_info once, with
// the version --version prints.
func TestBuildInfoIsServedOnceWithTheStampedVersion(t *testing.T) {
	reg := metrics.NewRegistry()
	if err := registerBuildInfo(reg); err != nil {
		t.Fatal(err)
	}
	mfs, err := servedGatherer(reg).Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	var found int
	for _, mf := range mfs {
		if mf.GetName() != "kubernetes_build_info" {
			continue
		}
		found++
		m := mf.GetMetric()
		if len(m) != 1 {
			t.Fatalf("kubernetes_build_info has %d series; want 1", len(m))
		}
		for _, l := range m[0].GetLabel() {
			if l.GetName() == "git_version" && l.GetValue() != buildVersion().GitVersion {
				t.Errorf("git_version %q; want %q", l.GetValue(), buildVersion().GitVersion)
			}
		}
	}
	if found != 1 {
		t.Errorf("kubernetes_build_info served %d times; want once", found)
	}
	var out bytes.Buffer
	printVersion(&out, "true")
	if got := out.String(); !strings.HasPrefix(got, "kube-ipvs-proxy ") || !strings.Contains(got, buildVersion().GitVersion) {
		t.Errorf("--version printed %q", got)
	}
}
