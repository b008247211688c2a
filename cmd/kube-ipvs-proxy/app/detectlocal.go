package app

import (
	"strings"

	"k8s.io/klog/v2"
)

// Local traffic detection modes (--detect-local-mode, detectLocalMode):
// kube-proxy's four. Empty means ClusterCIDR.
const (
	localModeClusterCIDR         = "ClusterCIDR"
	localModeNodeCIDR            = "NodeCIDR"
	localModeBridgeInterface     = "BridgeInterface"
	localModeInterfaceNamePrefix = "InterfaceNamePrefix"
)

var localModes = []string{localModeClusterCIDR, localModeNodeCIDR, localModeBridgeInterface, localModeInterfaceNamePrefix}

// maxIfName is the longest interface name the kernel allows (IFNAMSIZ-1).
const maxIfName = 15

// podInterface is the interface that tells this node's pods, and whether
// it is a name prefix: the bridge in detectLocalMode BridgeInterface,
// the prefix in InterfaceNamePrefix, "" in the address modes.
func (o *Options) podInterface() (name string, prefix bool) {
	switch o.Config.DetectLocalMode {
	case localModeBridgeInterface:
		return o.Config.DetectLocal.BridgeInterface, false
	case localModeInterfaceNamePrefix:
		return o.Config.DetectLocal.InterfaceNamePrefix, true
	}
	return "", false
}

// validateDetectLocal checks detectLocalMode and the interface its mode
// reads as kube-proxy's validation does: a known mode, and a non-empty
// bridge name or prefix. A name longer than any interface's is refused
// too: kube-proxy's rules would never match it (nft refuses it), where
// ours would silently match nothing.
func (o *Options) validateDetectLocal(add func(flag, field, format string, a ...any)) {
	c := &o.Config
	flag, field := "", ""
	switch m := string(c.DetectLocalMode); m {
	case "", localModeClusterCIDR, localModeNodeCIDR:
		return
	case localModeBridgeInterface:
		flag, field = "pod-bridge-interface", "detectLocal.bridgeInterface"
	case localModeInterfaceNamePrefix:
		flag, field = "pod-interface-name-prefix", "detectLocal.interfaceNamePrefix"
	default:
		add("detect-local-mode", "detectLocalMode", "unsupported value %q, want one of %s or empty", m, strings.Join(localModes, ", "))
		return
	}
	name, _ := o.podInterface()
	switch {
	case name == "":
		add(flag, field, "must not be empty with detectLocalMode %s", c.DetectLocalMode)
	case len(name) > maxIfName:
		add(flag, field, "%q is longer than %d bytes, the longest interface name", name, maxIfName)
	}
}

// logDetectLocal says, once at startup, how local traffic is detected
// in the interface modes (useNodeCIDRs says it for NodeCIDR).
func (o *Options) logDetectLocal(logger klog.Logger) {
	name, prefix := o.podInterface()
	if name == "" {
		return
	}
	what := "interface"
	if prefix {
		what = "interfacePrefix"
	}
	logger.Info("Detecting local traffic by the input interface", "detectLocalMode", o.Config.DetectLocalMode, what, name)
}
