package app

import (
	"testing"

	clientfeatures "k8s.io/client-go/features"
)

// fixedGates answers every gate with on.
type fixedGates bool

func (g fixedGates) Enabled(clientfeatures.Feature) bool { return bool(g) }

func TestClientGates(t *testing.T) {
	tests := []struct {
		name  string
		gates map[string]bool
		rest  fixedGates
		ask   clientfeatures.Feature
		want  bool
	}{
		{"a client-go gate given is what client-go sees", map[string]bool{"WatchListClient": false}, true, clientfeatures.WatchListClient, false},
		{"a client-go gate given wins over client-go's own", map[string]bool{"ClientsPreferCBOR": true}, false, clientfeatures.ClientsPreferCBOR, true},
		{"a gate not given is client-go's own", map[string]bool{"WatchListClient": false}, true, clientfeatures.InformerResourceVersion, true},
		{"a locked gate stays client-go's", map[string]bool{"InOrderInformers": false}, true, clientfeatures.InOrderInformers, true},
		{"our own gates are not client-go's", map[string]bool{"AllowServiceExternalIPs": false, "WatchListClient": true}, false, "AllowServiceExternalIPs", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := clientGates{set: clientGatesGiven(tc.gates), rest: tc.rest}
			if got := g.Enabled(tc.ask); got != tc.want {
				t.Errorf("Enabled(%s) = %t, want %t", tc.ask, got, tc.want)
			}
		})
	}
}

func TestClientGatesKnowClientGosGates(t *testing.T) {
	for _, f := range []clientfeatures.Feature{clientfeatures.WatchListClient, clientfeatures.InformerResourceVersion,
		clientfeatures.ClientsAllowCBOR, clientfeatures.ClientsPreferCBOR, clientfeatures.InOrderInformers} {
		if _, ok := clientGateSpecs[f]; !ok {
			t.Errorf("%s: not among client-go's gates", f)
		}
	}
	if _, ok := clientGateSpecs["AllowServiceExternalIPs"]; ok {
		t.Error("AllowServiceExternalIPs counted as client-go's")
	}
}

// TestNoClientGatesGivenLeavesClientGoAlone: without a client-go gate,
// client-go keeps its own gates (and KUBE_FEATURE_<name>).
func TestNoClientGatesGivenLeavesClientGoAlone(t *testing.T) {
	before := clientfeatures.FeatureGates()
	installClientGates(map[string]bool{"AllowServiceExternalIPs": true, "InOrderInformers": false})
	if clientfeatures.FeatureGates() != before {
		t.Error("client-go's gates were replaced")
	}
}
