package app

import (
	"fmt"
	"maps"

	clientfeatures "k8s.io/client-go/features"
)

// client-go has feature gates of its own (WatchListClient,
// InformerResourceVersion, ClientsPreferCBOR and the rest). kube-proxy
// registers them in its feature gate and hands that gate back to
// client-go, so its --feature-gates and the config file's featureGates
// set them too: `--feature-gates=WatchListClient=false` makes its
// informers LIST instead of streaming the initial state. This file does
// the same for kube-ipvs-proxy.

// clientGateSpecs are client-go's gates with their defaults, as client-go
// registers them in a binary's feature gate.
var clientGateSpecs = func() gateSpecs {
	specs := gateSpecs{}
	// Cannot fail: gateSpecs.Add only records.
	_ = clientfeatures.AddFeaturesToExistingFeatureGates(specs)
	return specs
}()

// gateSpecs records the gates client-go registers.
type gateSpecs map[clientfeatures.Feature]clientfeatures.FeatureSpec

// Add implements clientfeatures.Registry.
func (s gateSpecs) Add(m map[clientfeatures.Feature]clientfeatures.FeatureSpec) error {
	maps.Copy(s, m)
	return nil
}

// clientGateError says whether gate name=on refuses the start, if it is
// one of client-go's: a gate client-go locks set against its lock, as
// kube-proxy refuses it. ok is false if client-go does not know the gate.
func clientGateError(name string, on bool) (refusal string, ok bool) {
	spec, ok := clientGateSpecs[clientGateName(name)]
	if !ok || !spec.LockToDefault || spec.Default == on {
		return "", ok
	}
	return fmt.Sprintf("feature gate %s=%t: client-go locks it to %t", name, on, spec.Default), true
}

// clientGateName is name as client-go's gate name.
func clientGateName(name string) clientfeatures.Feature { return clientfeatures.Feature(name) }

// clientGatesGiven picks client-go's gates out of the gates given,
// leaving out the locked ones.
func clientGatesGiven(gates map[string]bool) map[clientfeatures.Feature]bool {
	set := map[clientfeatures.Feature]bool{}
	for name, on := range gates {
		if spec, ok := clientGateSpecs[clientfeatures.Feature(name)]; ok && !spec.LockToDefault {
			set[clientfeatures.Feature(name)] = on
		}
	}
	return set
}

// clientGates answers client-go from the gates given and, for the rest,
// from the gates it had: its defaults, or KUBE_FEATURE_<name> from the
// environment.
type clientGates struct {
	set  map[clientfeatures.Feature]bool
	rest clientfeatures.Gates
}

// Enabled implements clientfeatures.Gates.
func (g clientGates) Enabled(f clientfeatures.Feature) bool {
	if on, ok := g.set[f]; ok {
		return on
	}
	return g.rest.Enabled(f)
}

// installClientGates hands client-go the gates given for it. Call it
// before making any client or informer: client-go reads some gates when
// it builds them. With none of client-go's gates given, client-go keeps
// its own.
func installClientGates(gates map[string]bool) {
	set := clientGatesGiven(gates)
	if len(set) == 0 {
		return
	}
	clientfeatures.ReplaceFeatureGates(clientGates{set: set, rest: clientfeatures.FeatureGates()})
}
