//go:build !integration

package benchscale

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/apiserver"
)

// seedAbove is the workload size above which the loaded apiserver's etcd
// is kept as a seed (.cache/bench-scale/etcd-seeds) and later runs of
// the same workload start from it instead of loading it again. Each
// ClusterIP the apiserver allocates re-counts the IPAddresses already
// allocated, so the load grows as the square of the workload.
const seedAbove = 10000

// seedPath is where the etcd seed of w loaded into an apiserver started
// with opts is kept, keyed on its inputs: the objects the load creates,
// the apiserver's options and the kube-apiserver and etcd binaries.
func seedPath(t *testing.T, repo string, w Workload, opts apiserver.Options) string {
	t.Helper()
	h := sha256.New()
	enc := json.NewEncoder(h)
	put := func(v any) {
		if err := enc.Encode(v); err != nil {
			t.Fatalf("etcd seed key: %v", err)
		}
	}
	put(opts)
	for i := range Namespaces {
		put(Namespace(i))
	}
	put(loadNode())
	for i := range w.Services {
		put(w.Service(i))
		put(w.Slice(i, -1))
	}
	bin := filepath.Join(repo, ".cache", "k8s", "bin")
	for _, name := range []string{"kube-apiserver", "etcd"} {
		if err := hashFile(h, filepath.Join(bin, name)); err != nil {
			t.Fatalf("etcd seed key: %v", err)
		}
	}
	key := hex.EncodeToString(h.Sum(nil))[:16]
	return filepath.Join(repo, ".cache", "bench-scale", "etcd-seeds", fmt.Sprintf("%d-%s", w.Services, key))
}

func hashFile(h hash.Hash, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(h, f)
	return err
}

// saveSeed keeps the loaded apiserver's etcd at seed, and removes the
// seeds of the same size made from other inputs.
func saveSeed(t *testing.T, c *apiserver.Cluster, seed string, services int) {
	t.Helper()
	start := time.Now()
	if err := c.SaveEtcd(seed); err != nil {
		// The run goes on if the apiserver serves again; if not, it
		// fails at its first request.
		t.Logf("etcd seed not saved: %v", err)
		return
	}
	t.Logf("etcd seed saved to %s in %v", seed, time.Since(start).Round(time.Millisecond))
	others, _ := filepath.Glob(filepath.Join(filepath.Dir(seed), fmt.Sprintf("%d-*", services)))
	for _, o := range others {
		if o != seed && !strings.Contains(filepath.Base(o), ".partial-") {
			t.Logf("removing the etcd seed %s (other inputs)", o)
			_ = os.RemoveAll(o)
		}
	}
}

// checkSeeded fails unless the apiserver started from a seed serves the
// workload's services and EndpointSlices, counted from one-item lists.
func checkSeeded(t *testing.T, c *apiserver.Cluster, w Workload, seed string) {
	t.Helper()
	cs := kubernetes.NewForConfigOrDie(c.AdminConfig())
	ctx := context.Background()
	svcs, err := cs.CoreV1().Services("").List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		t.Fatalf("services in the cluster seeded from %s: %v", seed, err)
	}
	slices, err := cs.DiscoveryV1().EndpointSlices("").List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		t.Fatalf("EndpointSlices in the cluster seeded from %s: %v", seed, err)
	}
	count := func(n int, remaining *int64) int {
		if remaining != nil {
			n += int(*remaining)
		}
		return n
	}
	// The apiserver's own kubernetes Service is there too.
	gotSvcs, gotSlices := count(len(svcs.Items), svcs.RemainingItemCount), count(len(slices.Items), slices.RemainingItemCount)
	if gotSvcs != w.Services+1 || gotSlices != w.Services {
		t.Fatalf("the cluster seeded from %s serves %d services and %d EndpointSlices, want %d and %d: delete the seed to load the workload afresh",
			seed, gotSvcs, gotSlices, w.Services+1, w.Services)
	}
	t.Logf("the workload's %d services come from the etcd seed %s", w.Services, seed)
}
