package main

import (
	"encoding/json"
	"strings"
	"testing"
)

const labLease = `FLANNEL_NETWORK=10.244.0.0/16
FLANNEL_SUBNET=10.244.1.1/24
FLANNEL_MTU=1450
FLANNEL_IPMASQ=true
`

func TestParseLeaseNamesTheBadKey(t *testing.T) {
	for _, tc := range []struct {
		name, text, wantErr string
	}{
		{"the lab's lease", labLease, ""},
		{"IPv6 keys are ignored", labLease + "FLANNEL_IPV6_NETWORK=fd00::/56\n", ""},
		{"no subnet", "FLANNEL_NETWORK=10.244.0.0/16\nFLANNEL_MTU=1450\nFLANNEL_IPMASQ=true\n", "no FLANNEL_SUBNET"},
		{"bad network", strings.Replace(labLease, "10.244.0.0/16", "10.244.0.0", 1), "FLANNEL_NETWORK"},
		{"bad mtu", strings.Replace(labLease, "1450", "big", 1), "FLANNEL_MTU"},
		{"not key=value", labLease + "junk\n", "not KEY=VALUE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseLease(tc.text)
			if tc.wantErr == "" && err != nil {
				t.Fatalf("parseLease: %v", err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("parseLease error %v, want one naming %q", err, tc.wantErr)
			}
		})
	}
}

func TestDelegateConfTakesIPAMFromTheLeaseAndKeepsTheDelegatesSettings(t *testing.T) {
	l, err := parseLease(labLease)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		delegate map[string]any
		want     string
	}{
		{
			name:     "kube-flannel's delegate: a gateway bridge, no masquerade since flanneld does it",
			delegate: map[string]any{"hairpinMode": true, "isDefaultGateway": true},
			want: `{"cniVersion":"0.3.1","hairpinMode":true,"ipMasq":false,"ipam":{"ranges":[[{"subnet":"10.244.1.0/24"}]],` +
				`"routes":[{"dst":"10.244.0.0/16"}],"type":"host-local"},"isDefaultGateway":true,"isGateway":true,"mtu":1450,"name":"cbr0","type":"bridge"}`,
		},
		{
			name:     "the delegate's own settings win over the defaults, never over the lease's IPAM",
			delegate: map[string]any{"type": "ptp", "mtu": 1400, "ipMasq": true, "ipam": map[string]any{"type": "dhcp"}},
			want: `{"cniVersion":"0.3.1","ipMasq":true,"ipam":{"ranges":[[{"subnet":"10.244.1.0/24"}]],` +
				`"routes":[{"dst":"10.244.0.0/16"}],"type":"host-local"},"mtu":1400,"name":"cbr0","type":"ptp"}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := json.Marshal(delegateConf("cbr0", "0.3.1", tc.delegate, l))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("delegate config\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}
