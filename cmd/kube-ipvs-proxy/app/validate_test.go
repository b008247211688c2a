package app

import (
	"strings"
	"testing"
)

// TestValidateRefusesWhatKubeProxyRefuses: a value kube-proxy v1.36's
// validation (pkg/proxy/apis/config/validation, component-base's logging
// validation) refuses is refused here too, with its words, naming the
// file and field; the value next to it that kube-proxy accepts is
// accepted. None is read as something else.
func TestValidateRefusesWhatKubeProxyRefuses(t *testing.T) {
	tests := []struct {
		name      string
		file      string // after typeMeta
		kubeProxy string // its verdict: "refuses" or "accepts"
		wantErr   string // our message; "" when accepted
	}{
		{"negative conntrack.maxPerCore", "conntrack: {maxPerCore: -1}\n", "refuses", "c.yaml: conntrack.maxPerCore: must be greater than or equal to 0, got -1"},
		{"zero conntrack.maxPerCore: leave the limit", "conntrack: {maxPerCore: 0}\n", "accepts", ""},
		{"negative conntrack.min", "conntrack: {min: -5}\n", "refuses", "c.yaml: conntrack.min: must be greater than or equal to 0, got -5"},
		{"negative conntrack.tcpEstablishedTimeout", "conntrack: {tcpEstablishedTimeout: -1s}\n", "refuses", "c.yaml: conntrack.tcpEstablishedTimeout: must be greater than or equal to 0, got -1s"},
		{"zero conntrack.tcpEstablishedTimeout: leave it", "conntrack: {tcpEstablishedTimeout: 0s}\n", "accepts", ""},
		{"negative conntrack.tcpCloseWaitTimeout", "conntrack: {tcpCloseWaitTimeout: -1m}\n", "refuses", "c.yaml: conntrack.tcpCloseWaitTimeout: must be greater than or equal to 0, got -1m0s"},
		{"negative conntrack.udpTimeout", "conntrack: {udpTimeout: -1s}\n", "refuses", "c.yaml: conntrack.udpTimeout: must be greater than or equal to 0, got -1s"},
		{"negative conntrack.udpStreamTimeout", "conntrack: {udpStreamTimeout: -2s}\n", "refuses", "c.yaml: conntrack.udpStreamTimeout: must be greater than or equal to 0, got -2s"},
		{"negative ipvs.tcpTimeout", "ipvs: {tcpTimeout: -1s}\n", "refuses", "c.yaml: ipvs.tcpTimeout: must be greater than or equal to 0, got -1s"},
		{"negative ipvs.tcpFinTimeout", "ipvs: {tcpFinTimeout: -1s}\n", "refuses", "c.yaml: ipvs.tcpFinTimeout: must be greater than or equal to 0, got -1s"},
		{"negative ipvs.udpTimeout", "ipvs: {udpTimeout: -1s}\n", "refuses", "c.yaml: ipvs.udpTimeout: must be greater than or equal to 0, got -1s"},
		{"negative ipvs.minSyncPeriod", "ipvs: {minSyncPeriod: -1s}\n", "refuses", "c.yaml: ipvs.minSyncPeriod: must be greater than or equal to 0, got -1s"},
		{"negative ipvs.syncPeriod", "ipvs: {syncPeriod: -1s}\n", "refuses", "c.yaml: ipvs.syncPeriod: must be greater than 0, got -1s"},
		{"negative configSyncPeriod", "configSyncPeriod: -1s\n", "refuses", "c.yaml: configSyncPeriod: must be greater than 0, got -1s"},
		{"iptables.masqueradeBit over 31", "iptables: {masqueradeBit: 32}\n", "refuses", "c.yaml: iptables.masqueradeBit: must be within the range [0, 31], got 32"},
		{"nftables.masqueradeBit is not validated in the ipvs mode", "nftables: {masqueradeBit: 40}\n", "accepts", ""},
		{"negative clientConnection.burst", "clientConnection: {burst: -1}\n", "refuses", "c.yaml: clientConnection.burst: must be greater than or equal to 0, got -1"},
		{"a zone in bindAddress", "bindAddress: fe80::1%eth0\n", "refuses", `c.yaml: bindAddress: "fe80::1%eth0" is not an IP address`},
		{"an ipvs.excludeCIDRs entry with a space", "ipvs: {excludeCIDRs: [10.0.0.0/8, ' 10.1.0.0/16']}\n", "refuses", `c.yaml: ipvs.excludeCIDRs[1]: invalid CIDR " 10.1.0.0/16"`},
		{"ipvs.excludeCIDRs entries", "ipvs: {excludeCIDRs: [10.0.0.0/8, 'fd00::/64']}\n", "accepts", ""},
		{"negative logging.flushFrequency", "logging: {flushFrequency: -1s}\n", "refuses", "c.yaml: logging.flushFrequency: must be greater than zero, got -1s"},
		{"a vmodule pattern with an equal sign", "logging: {vmodule: [{filePattern: a=b, verbosity: 1}]}\n", "refuses", `c.yaml: logging.vmodule[0]: file pattern "a=b" must not contain equal sign or comma`},
		{"a vmodule pattern with a comma", "logging: {vmodule: [{filePattern: x, verbosity: 1}, {filePattern: 'a,b', verbosity: 1}]}\n", "refuses", `c.yaml: logging.vmodule[1]: file pattern "a,b" must not contain equal sign or comma`},
		{"an empty vmodule pattern", "logging: {vmodule: [{verbosity: 1}]}\n", "refuses", "c.yaml: logging.vmodule[0]: file pattern must not be empty"},
		{"logging.verbosity over int32", "logging: {verbosity: 2147483648}\n", "refuses", "c.yaml: logging.verbosity: must be <= 2147483647, got 2147483648"},
		{"a vmodule level over int32", "logging: {vmodule: [{filePattern: a, verbosity: 2147483648}]}\n", "refuses", "c.yaml: logging.vmodule[0]: must be <= 2147483647, got 2147483648"},
		{"showHiddenMetricsForVersion the previous minor", "showHiddenMetricsForVersion: \"1.35\"\n", "accepts", ""},
		{"showHiddenMetricsForVersion another version", "showHiddenMetricsForVersion: \"1.34\"\n", "refuses", `c.yaml: showHiddenMetricsForVersion: "1.34": must be omitted or have the value '1.35'; only the previous minor version is allowed`},
		{"a long bad value is cut in the message", "bindAddress: " + strings.Repeat("x", 300) + "\n", "refuses",
			`c.yaml: bindAddress: "` + strings.Repeat("x", 64) + `"… (300 bytes) is not an IP address`},
		{"a serviceProxyName that is a label value", ownTypeMeta + "serviceProxyName: my-proxy.v2\n", "accepts", ""},
		{"a serviceProxyName that no label can hold", ownTypeMeta + "serviceProxyName: my proxy\n", "refuses",
			`c.yaml: serviceProxyName: "my proxy" is not a valid label value (services are selected by the label service.kubernetes.io/service-proxy-name): a valid label must be an empty string or consist of alphanumeric characters`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if (tc.kubeProxy == "refuses") != (tc.wantErr != "") {
				t.Fatalf("the case is wrong: kube-proxy %s, want error %q", tc.kubeProxy, tc.wantErr)
			}
			path := writeFile(t, t.TempDir(), "c.yaml", typeMeta+tc.file)
			o, _, err := parse(t, "--config", path, "--hostname-override", "n")
			if err == nil {
				err = o.Validate()
			}
			got := ""
			if err != nil {
				got = strings.ReplaceAll(err.Error(), path, "c.yaml")
			}
			switch {
			case tc.wantErr == "" && got != "":
				t.Errorf("refused: %s\nkube-proxy accepts it", got)
			case tc.wantErr != "" && !strings.Contains(got, tc.wantErr):
				t.Errorf("error %q\nwant it to contain %q (kube-proxy refuses it)", got, tc.wantErr)
			}
		})
	}
}
