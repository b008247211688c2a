package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/klog/v2"
)

// TestOOMScoreAdjIsWrittenWhenSet: oomScoreAdj, when set, is written to
// the process's oom_score_adj; unset leaves it alone; a failed write is
// not fatal, as kube-proxy.
func TestOOMScoreAdjIsWrittenWhenSet(t *testing.T) {
	for _, tc := range []struct {
		name string
		adj  *int32
		want string
	}{
		{name: "kube-proxy's default", adj: new(int32(-999)), want: "-999"},
		{name: "a positive value", adj: new(int32(500)), want: "500"},
		{name: "unset leaves the kernel's", want: "0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "oom_score_adj")
			if err := os.WriteFile(path, []byte("0"), 0o644); err != nil {
				t.Fatal(err)
			}
			applyOOMScoreAdj(klog.Background(), path, tc.adj)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.TrimSpace(string(b)); got != tc.want {
				t.Errorf("oom_score_adj %q, want %q", got, tc.want)
			}
		})
	}
	t.Run("a failed write is logged, not fatal", func(t *testing.T) {
		applyOOMScoreAdj(klog.Background(), filepath.Join(t.TempDir(), "missing", "oom_score_adj"), new(int32(-999)))
	})
}
