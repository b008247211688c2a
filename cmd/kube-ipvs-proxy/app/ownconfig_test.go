package app

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

const ownTypeMeta = "---\napiVersion: kube-ipvs-proxy.io/v1alpha1\nkind: KubeIPVSProxyConfiguration\n"

// TestOwnDocumentSetsOurSettings: the --config file's second document
// sets each of our own settings, and a flag given on the command line
// wins over its field.
func TestOwnDocumentSetsOurSettings(t *testing.T) {
	file := typeMeta + ownTypeMeta + `serviceProxyName: mine
notrackServices: [kube-system/kube-dns]
refuseNodeAddressExternalIPs: true
maxVirtualServersPerService: 50
maxVirtualServersPerNode: 9000
ipvsInterface: kipvs1
ipvsGracefulPeriod: 90s
`
	tests := []struct {
		name  string
		flags []string
		check func(*Options) string
	}{
		{"serviceProxyName", nil, func(o *Options) string { return o.ServiceProxyName + " " + o.origin("service-proxy-name") }},
		{"notrackServices", nil, func(o *Options) string { return strings.Join(o.NoTrackServices, ",") }},
		{"refuseNodeAddressExternalIPs", nil, func(o *Options) string {
			if o.RefuseNodeAddressExternalIPs {
				return "true"
			}
			return "false"
		}},
		{"maxVirtualServersPerService", nil, func(o *Options) string { return strconv.Itoa(o.MaxVirtualServersPerService) }},
		{"maxVirtualServersPerNode", nil, func(o *Options) string { return strconv.Itoa(o.MaxVirtualServersPerNode) }},
		{"ipvsInterface", nil, func(o *Options) string { return o.IPVSInterface }},
		{"ipvsGracefulPeriod", nil, func(o *Options) string { return o.IPVSGracefulPeriod.String() }},
		{"the flag wins", []string{"--max-virtual-servers-per-service", "7"}, func(o *Options) string {
			return strconv.Itoa(o.MaxVirtualServersPerService) + " " + o.origin("max-virtual-servers-per-service")
		}},
	}
	want := map[string]string{
		"serviceProxyName":             "mine c.yaml: serviceProxyName",
		"notrackServices":              "kube-system/kube-dns",
		"refuseNodeAddressExternalIPs": "true",
		"maxVirtualServersPerService":  "50",
		"maxVirtualServersPerNode":     "9000",
		"ipvsInterface":                "kipvs1",
		"ipvsGracefulPeriod":           (90 * time.Second).String(),
		"the flag wins":                "7 --max-virtual-servers-per-service",
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, t.TempDir(), "c.yaml", file)
			o, _ := mustParse(t, append([]string{"--config", path}, tc.flags...)...)
			got := strings.ReplaceAll(tc.check(o), path, "c.yaml")
			if got != want[tc.name] {
				t.Errorf("got %q, want %q", got, want[tc.name])
			}
		})
	}
}

// TestConfigFileDocuments: what the loader accepts and refuses, every
// message naming the file and the line or field.
func TestConfigFileDocuments(t *testing.T) {
	tests := []struct {
		name, data      string
		wantErr, wantOK string // a substring of the error, or of the warnings
	}{
		{name: "kube-proxy's document alone", data: typeMeta},
		{name: "ours first is refused, naming the rollback", data: "# c\n" + strings.TrimPrefix(ownTypeMeta, "---\n") + "maxVirtualServersPerNode: 3\n---\n" + typeMeta,
			wantErr: "c.yaml: line 1: the KubeIPVSProxyConfiguration document comes before the KubeProxyConfiguration: kube-proxy reads only a file's first document, so it would refuse this file and a rollback to kube-proxy with it would fail; put the KubeProxyConfiguration first"},
		{name: "ours first after an empty document is refused", data: "---\n" + ownTypeMeta + "---\n" + typeMeta, wantErr: "c.yaml: line 3: the KubeIPVSProxyConfiguration document comes before"},
		{name: "empty documents around", data: "---\n" + typeMeta + "---\n# nothing\n" + ownTypeMeta + "---\n"},
		{name: "unknown field in ours", data: typeMeta + ownTypeMeta + "maxVirtualServers: 3\n", wantOK: "c.yaml: maxVirtualServers: unknown field; ignored"},
		{name: "wrong type", data: typeMeta + ownTypeMeta + "maxVirtualServersPerService: many\n", wantErr: "c.yaml: maxVirtualServersPerService: want an integer, got a string"},
		{name: "bad duration", data: typeMeta + ownTypeMeta + "ipvsGracefulPeriod: soon\n", wantErr: `c.yaml: ipvsGracefulPeriod: want a duration such as "15m"`},
		{name: "list of numbers", data: typeMeta + ownTypeMeta + "notrackServices: [1]\n", wantErr: "c.yaml: notrackServices: [0]: want a string, got a number"},
		{name: "two of ours", data: typeMeta + ownTypeMeta + ownTypeMeta, wantErr: "c.yaml: line 7: a second KubeIPVSProxyConfiguration document"},
		{name: "two of kube-proxy's", data: typeMeta + "---\n" + typeMeta, wantErr: "c.yaml: line 4: apiVersion \"kubeproxy.config.k8s.io/v1alpha1\", kind \"KubeProxyConfiguration\": after the KubeProxyConfiguration, only one"},
		{name: "ours alone", data: strings.TrimPrefix(ownTypeMeta, "---\n"), wantErr: "c.yaml: no KubeProxyConfiguration document"},
		{name: "syntax error in the second document counts the file's lines", data: typeMeta + ownTypeMeta + "ipvsInterface: [\n", wantErr: "c.yaml: 6: "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, warnings, err := loadConfigDocuments("c.yaml", []byte(tc.data))
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("error %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want it to contain %q", err, tc.wantErr)
			}
			if got := strings.Join(warnings, "\n"); !strings.Contains(got, tc.wantOK) || tc.wantOK == "" && got != "" {
				t.Errorf("warnings %q, want %q", got, tc.wantOK)
			}
		})
	}
}

// TestOwnDocumentValuesValidatedByField: a value out of range in the
// file is reported with the file and field, not the flag.
func TestOwnDocumentValuesValidatedByField(t *testing.T) {
	path := writeFile(t, t.TempDir(), "c.yaml", typeMeta+ownTypeMeta+"maxVirtualServersPerService: -1\nipvsInterface: lo\n")
	o, _, err := parse(t, "--config", path)
	if err != nil {
		t.Fatal(err)
	}
	err = o.Validate()
	for _, want := range []string{path + ": maxVirtualServersPerService must not be negative", path + ": ipvsInterface must name a dummy interface"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v; want it to contain %q", err, want)
		}
	}
}

// TestREADMEOwnSettingsTableMatchesTheFields: README's table of our own
// settings has one row per field of the document, with its flag.
func TestREADMEOwnSettingsTableMatchesTheFields(t *testing.T) {
	b, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Our own settings\n")
	if !ok {
		t.Fatal(`README.md has no "## Our own settings" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var rows []string
	for _, l := range strings.Split(section, "\n") {
		if strings.HasPrefix(l, "| `--") {
			cells := strings.Split(l, "|")
			rows = append(rows, strings.TrimSpace(cells[1])+" "+strings.TrimSpace(cells[2]))
		}
	}
	var want []string
	for _, f := range ownFields {
		want = append(want, "`--"+f.flag+"` `"+f.name+"`")
	}
	if strings.Join(rows, "\n") != strings.Join(want, "\n") {
		t.Errorf("README rows:\n%s\nwant, in this order:\n%s", strings.Join(rows, "\n"), strings.Join(want, "\n"))
	}
}
