package app

import (
	"fmt"
	"io"
	"runtime/debug"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	apiversion "k8s.io/apimachinery/pkg/version"
	"k8s.io/component-base/version"
	"k8s.io/klog/v2"
)

// unstamped is component-base's gitVersion when the build set none.
const unstamped = "v0.0.0-master+$Format:%H$"

// buildVersion is the version the build stamped (hack/version.sh, into
// k8s.io/component-base/version as kube-proxy's is), else the main
// module's version from the build information, else (devel).
func buildVersion() apiversion.Info {
	info := version.Get()
	if info.GitVersion == unstamped || info.GitVersion == "" {
		info.GitVersion = "(devel)"
		if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
			info.GitVersion = bi.Main.Version
		}
	}
	return info
}

// printVersion answers --version as kube-proxy does: the version on one
// line, or with --version=raw every field.
func printVersion(w io.Writer, mode string) {
	info := buildVersion()
	if strings.EqualFold(mode, "raw") {
		fmt.Fprintf(w, "%#v\n", info)
		return
	}
	fmt.Fprintln(w, "kube-ipvs-proxy", info.GitVersion)
}

// logVersion logs the build's version first thing, as kube-proxy's
// "Version info" line: after `kubectl set image`, the pod's log says which
// binary runs.
func logVersion(logger klog.Logger) {
	logger.Info("Version info", "version", buildVersion())
}

// registerBuildInfo adds kubernetes_build_info, the gauge with kube-proxy's
// name and labels (component-base's version metric), set to 1 with this
// build's version.
func registerBuildInfo(reg prometheus.Registerer) error {
	info := buildVersion()
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kubernetes_build_info",
		Help: "A metric with a constant '1' value labeled by major, minor, git version, git commit, git tree state, build date, Go version, and compiler from which Kubernetes was built, and platform on which it is running.",
	}, []string{"major", "minor", "git_version", "git_commit", "git_tree_state", "build_date", "go_version", "compiler", "platform"})
	g.WithLabelValues(info.Major, info.Minor, info.GitVersion, info.GitCommit, info.GitTreeState,
		info.BuildDate, info.GoVersion, info.Compiler, info.Platform).Set(1)
	if err := reg.Register(g); err != nil {
		return fmt.Errorf("register kubernetes_build_info: %w", err)
	}
	return nil
}
