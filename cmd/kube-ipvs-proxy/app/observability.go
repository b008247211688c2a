package app

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	clientfeatures "k8s.io/client-go/features"
	"k8s.io/component-base/configz"
	jsonlog "k8s.io/component-base/logs/json"
	"k8s.io/component-base/metrics/legacyregistry"
	featuremetrics "k8s.io/component-base/metrics/prometheus/feature"
	_ "k8s.io/component-base/metrics/prometheus/restclient" // client-go's rest_client_* metrics, as kube-proxy
	"k8s.io/component-base/metrics/prometheus/slis"
	"k8s.io/klog/v2"
)

// What kube-proxy shows an operator besides its own metrics, from
// k8s.io/component-base: client-go's rest_client_* metrics,
// kubernetes_feature_enabled, /configz, /metrics/slis and JSON logs.

// configzName is kube-proxy's /configz section, its config API group.
const configzName = "kubeproxy.config.k8s.io"

// servedGatherer is what /metrics serves: ours (reg), and component-base's
// global registry (rest_client_*, kubernetes_feature_enabled and whatever
// else component-base registers there), whose go_* and process_* are
// reg's already.
func servedGatherer(reg prometheus.Gatherer) prometheus.Gatherer {
	return prometheus.Gatherers{reg, prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		mfs, err := legacyregistry.DefaultGatherer.Gather()
		out := mfs[:0]
		for _, mf := range mfs {
			if n := mf.GetName(); !strings.HasPrefix(n, "go_") && !strings.HasPrefix(n, "process_") {
				out = append(out, mf)
			}
		}
		return out, err
	})}
}

// installComponentRoutes adds kube-proxy's /configz (the effective
// configuration) and /metrics/slis to mux.
func installComponentRoutes(mux *http.ServeMux, cfg *KubeProxyConfiguration) error {
	configz.Delete(configzName) // a second Watch in one process (tests) replaces it
	cz, err := configz.New(configzName)
	if err != nil {
		return fmt.Errorf("configz: %w", err)
	}
	c := cfg.DeepCopy()
	c.APIVersion, c.Kind = configzName+"/v1alpha1", "KubeProxyConfiguration"
	if err := cz.Set(c); err != nil {
		return fmt.Errorf("configz: %w", err)
	}
	configz.InstallHandler(mux)
	slis.SLIMetricsWithReset{}.Install(mux)
	return nil
}

// recordFeatures sets kubernetes_feature_enabled, as kube-proxy's
// feature gate does: client-go's gates with their stage and effective
// value, and each kube-proxy gate we know (gateRules) with its stage in
// kube-proxy v1.36 and the value the proxy acts on: the one given in
// gates (--feature-gates, featureGates:), else its default.
func recordFeatures(ctx context.Context, gates map[string]bool) {
	featuremetrics.ResetFeatureInfoMetric()
	client := clientfeatures.FeatureGates()
	for name, spec := range clientGateSpecs {
		featuremetrics.RecordFeatureInfo(ctx, string(name), string(spec.PreRelease), client.Enabled(name))
	}
	for name, r := range gateRules {
		featuremetrics.RecordFeatureInfo(ctx, name, r.stage, gateOn(gates, name, r.def))
	}
}

// setupLogging switches klog to component-base's JSON logger for
// --logging-format=json (logging.format: json), at the configured
// verbosity, as kube-proxy does; text is klog's own.
func setupLogging(o *Options, stderr io.Writer) {
	lc := o.Config.Logging
	if lc.Format != "json" {
		return
	}
	logger, control := jsonlog.NewJSONLogger(lc.Verbosity, jsonlog.AddNopSync(stderr), nil, nil)
	verbosityMu.Lock()
	verbositySetters = append(verbositySetters, control.SetVerbosityLevel)
	verbosityMu.Unlock()
	klog.SetLoggerWithOptions(logger, klog.ContextualLogger(true), klog.FlushLogger(func() {}))
}

// hostFamilies are the families metrics and health report: those of the
// cluster CIDRs first (IPv4 when none is given), then the other one if
// the host has it: kube-proxy runs a proxier for each family the node
// supports, and reports both on a dual-stack-capable node whatever the
// cluster CIDRs say. hasIPv6 says whether the host has IPv6.
func hostFamilies(cidrs []string, hasIPv6 bool) []corev1.IPFamily {
	fams := ipFamilies(cidrs)
	switch {
	case len(fams) > 1:
	case fams[0] == corev1.IPv6Protocol:
		fams = append(fams, corev1.IPv4Protocol)
	case hasIPv6:
		fams = append(fams, corev1.IPv6Protocol)
	}
	return fams
}

// hostHasIPv6 says whether the kernel has IPv6 enabled.
func hostHasIPv6() bool {
	_, err := os.Stat("/proc/net/if_inet6")
	return err == nil
}
