package app

import (
	"os"
	"strconv"

	"k8s.io/klog/v2"
)

// oomScoreAdjPath is the proxy's own OOM score adjustment.
const oomScoreAdjPath = "/proc/self/oom_score_adj"

// applyOOMScoreAdj writes adj (when set) to path, as kube-proxy does at
// startup so that the kernel's OOM killer spares the node's proxy. As in
// kube-proxy a failure (no CAP_SYS_RESOURCE to lower it, say) is logged
// and the proxy goes on.
func applyOOMScoreAdj(logger klog.Logger, path string, adj *int32) {
	if adj == nil {
		return
	}
	if err := os.WriteFile(path, []byte(strconv.Itoa(int(*adj))), 0o644); err != nil {
		logger.Error(err, "Failed to apply the OOM score adjustment; the kernel's stays", "oomScoreAdj", *adj)
		return
	}
	logger.V(2).Info("Applied the OOM score adjustment", "oomScoreAdj", *adj, "path", path)
}
