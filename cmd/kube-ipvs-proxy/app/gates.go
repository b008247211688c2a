package app

import (
	"fmt"
	"slices"
	"strconv"
)

// Feature gates kube-proxy v1.36 acts on, by what kube-ipvs-proxy does
// with each value. kube-proxy refuses to start when a gate locked to its
// default is set to the other value, and so do we; a gate it acts on that
// we do not implement refuses the start too, naming it, rather than being
// ignored. client-go's gates are client-go's (clientgates.go).
const (
	// gateAllowServiceExternalIPs=false: spec.externalIPs get no
	// virtual servers, as kube-proxy's ServicePort.ExternalIPs.
	gateAllowServiceExternalIPs = "AllowServiceExternalIPs"
)

// gateRule is what a kube-proxy feature gate's values mean to us.
type gateRule struct {
	// stage is the gate's in kube-proxy v1.36 ("ALPHA", "BETA", "" for
	// GA), as kubernetes_feature_enabled labels it.
	stage string
	// def is the value when none is given: kube-proxy's default, but for
	// a gate whose on value we refuse, which we behave as off whatever
	// kube-proxy's default.
	def bool
	// refuse, by value ("true", "false"), is why that value refuses the
	// start; a value missing here is implemented or has no effect on a
	// Linux IPVS proxy.
	refuse map[string]string
}

// gateRules are the gates kube-proxy v1.36 consults (pkg/proxy,
// cmd/kube-proxy, component-base's logging, metrics and zpages).
var gateRules = map[string]gateRule{
	gateAllowServiceExternalIPs:     {stage: stageGA, def: true},
	"PreferSameTrafficDistribution": {stage: stageGA, def: true, refuse: map[string]string{"false": "locked to true in kube-proxy v1.36"}},
	"MultiCIDRServiceAllocator":     {stage: stageGA, def: true, refuse: map[string]string{"false": "locked to true in kube-proxy v1.36"}},
	// kube-proxy v1.36 serves /flagz and /statusz by default (BETA).
	"ComponentFlagz":      {stage: stageBeta, refuse: map[string]string{"true": "kube-proxy serves /flagz with it; kube-ipvs-proxy does not"}},
	"ComponentStatusz":    {stage: stageBeta, refuse: map[string]string{"true": "kube-proxy serves /statusz with it; kube-ipvs-proxy does not"}},
	"NativeHistograms":    {stage: stageAlpha, refuse: map[string]string{"true": "kube-ipvs-proxy's /metrics has no native histograms"}},
	"WinDSR":              {stage: stageGA, def: true}, // Windows only
	"WinOverlay":          {stage: stageGA, def: true}, // Windows only
	"ContextualLogging":   {stage: stageBeta, def: true},
	"LoggingAlphaOptions": {stage: stageAlpha}, // the options it allows are ignored with a notice
	"LoggingBetaOptions":  {stage: stageBeta, def: true},
	"AllAlpha":            {stage: stageAlpha},
	"AllBeta":             {stage: stageBeta},
}

// The stages kubernetes_feature_enabled labels a gate with
// (component-base's featuregate.prerelease).
const (
	stageAlpha = "ALPHA"
	stageBeta  = "BETA"
	stageGA    = ""
)

// gateErrors names each gate whose value refuses the start: one kube-proxy
// locks, one kube-proxy acts on that we do not implement, and client-go's
// locked gates set against their lock, as kube-proxy refuses them.
func gateErrors(gates map[string]bool) []string {
	var out []string
	for name, on := range gates {
		if w, ok := clientGateError(name, on); ok {
			if w != "" {
				out = append(out, w)
			}
			continue
		}
		if why, ok := gateRules[name].refuse[strconv.FormatBool(on)]; ok {
			out = append(out, fmt.Sprintf("feature gate %s=%t: %s", name, on, why))
		}
	}
	slices.Sort(out)
	return out
}

// gateWarnings names each gate that is unknown to us: kube-proxy knows
// every Kubernetes gate, and the ones it does not act on change nothing
// there either.
func gateWarnings(gates map[string]bool) []string {
	var out []string
	for name := range gates {
		if _, ok := clientGateSpecs[clientGateName(name)]; ok {
			continue
		}
		if _, ok := gateRules[name]; !ok {
			out = append(out, fmt.Sprintf("feature gate %s: unknown to kube-ipvs-proxy; ignored", name))
		}
	}
	slices.Sort(out)
	return out
}

// gateOn is gate name's value: the value given, else def.
func gateOn(gates map[string]bool, name string, def bool) bool {
	if on, ok := gates[name]; ok {
		return on
	}
	return def
}
