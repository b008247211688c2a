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
	// refuse, by value ("true", "false"), is why that value refuses the
	// start; a value missing here is implemented or has no effect on a
	// Linux IPVS proxy.
	refuse map[string]string
}

// gateRules are the gates kube-proxy v1.36 consults (pkg/proxy,
// cmd/kube-proxy, component-base's logging, metrics and zpages).
var gateRules = map[string]gateRule{
	gateAllowServiceExternalIPs:     {},
	"PreferSameTrafficDistribution": {refuse: map[string]string{"false": "locked to true in kube-proxy v1.36"}},
	"MultiCIDRServiceAllocator":     {refuse: map[string]string{"false": "locked to true in kube-proxy v1.36"}},
	"ComponentFlagz":                {refuse: map[string]string{"true": "kube-proxy serves /flagz with it; kube-ipvs-proxy does not"}},
	"ComponentStatusz":              {refuse: map[string]string{"true": "kube-proxy serves /statusz with it; kube-ipvs-proxy does not"}},
	"NativeHistograms":              {refuse: map[string]string{"true": "kube-ipvs-proxy's /metrics has no native histograms"}},
	"WinDSR":                        {}, // Windows only
	"WinOverlay":                    {}, // Windows only
	"ContextualLogging":             {},
	"LoggingAlphaOptions":           {}, // the options it allows are ignored with a notice
	"LoggingBetaOptions":            {},
	"AllAlpha":                      {},
	"AllBeta":                       {},
}

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
