package app

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	kubeproxyconfig "k8s.io/kube-proxy/config/v1alpha1"
	sigsjson "sigs.k8s.io/json"
)

const jsonTypeMeta = `{"apiVersion": "kubeproxy.config.k8s.io/v1alpha1", "kind": "KubeProxyConfiguration"`

// TestLoadConfig: every unknown field warns with its path; a wrong type,
// kind or syntax is an error naming the file and the field or line, every
// bad value of the file, one a line, in key order.
func TestLoadConfig(t *testing.T) {
	// More unknown fields than one UnmarshalStrict call lists (100).
	manyUnknown, manyWarnings := typeMeta+"ipvs:\n", []string(nil)
	for i := range 150 {
		manyUnknown += fmt.Sprintf("  u%03d: 1\n", i)
		manyWarnings = append(manyWarnings, fmt.Sprintf("c.yaml: ipvs.u%03d: unknown field; ignored", i))
	}
	// ...in list elements; and with a key holding a dot, the 100th, which
	// must not be taken for ipvs' scheduler when the listed fields are
	// removed to list the rest.
	listUnknown, listWarnings := typeMeta+"logging:\n  vmodule:\n", []string(nil)
	dotted, dottedWarnings := typeMeta+"ipvs: {scheduler: lc}\nipvs.scheduler: rr\n", []string(nil)
	for i := range 150 {
		listUnknown += fmt.Sprintf("  - {filePattern: x, level: %d}\n", i)
		listWarnings = append(listWarnings, fmt.Sprintf("c.yaml: logging.vmodule[%d].level: unknown field; ignored", i))
		dotted += fmt.Sprintf("%c%03d: 1\n", "az"[min(i/99, 1)], i)
		dottedWarnings = append(dottedWarnings, fmt.Sprintf("c.yaml: %c%03d: unknown field; ignored", "az"[min(i/99, 1)], i))
	}
	dottedWarnings = slices.Insert(dottedWarnings, 99, "c.yaml: ipvs.scheduler: unknown field; ignored")
	tests := []struct {
		name         string
		data         string
		wantWarnings []string
		wantErr      []string // the error's lines; nil means success
	}{
		{"only apiVersion and kind is all defaults", typeMeta, nil, nil},
		{"an unknown top-level field warns", typeMeta + "udpIdleTimeout: 250ms\n",
			[]string{"c.yaml: udpIdleTimeout: unknown field; ignored"}, nil},
		{"several unknown fields all warn, each with its path", typeMeta +
			"ipvs:\n  schedular: wrr\n  scheduler: lc\n  foo: {bar: 1}\nbar: 2\nlogging:\n  vmodule:\n  - filePattern: x\n  - filePattern: z\n    level: 2\n",
			[]string{
				"c.yaml: bar: unknown field; ignored",
				"c.yaml: ipvs.foo: unknown field; ignored",
				"c.yaml: ipvs.schedular: unknown field; ignored",
				"c.yaml: logging.vmodule[1].level: unknown field; ignored",
			}, nil},
		{"field names are case-sensitive", typeMeta + "IPVS: {}\nipvs: {Scheduler: rr}\n",
			[]string{"c.yaml: IPVS: unknown field; ignored", "c.yaml: ipvs.Scheduler: unknown field; ignored"}, nil},
		{"150 unknown fields give 150 warnings, past the decoder's limit", manyUnknown, manyWarnings, nil},
		{"150 unknown fields in list elements give 150 warnings", listUnknown, listWarnings, nil},
		{"a key holding a dot is not taken for a path past the limit", dotted, dottedWarnings, nil},

		{"a wrong apiVersion is an error", "apiVersion: kubeproxy.config.k8s.io/v1beta1\nkind: KubeProxyConfiguration\n", nil,
			[]string{`c.yaml: apiVersion "kubeproxy.config.k8s.io/v1beta1", kind "KubeProxyConfiguration": want apiVersion kubeproxy.config.k8s.io/v1alpha1, kind KubeProxyConfiguration`}},
		{"a wrong kind is an error", "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeletConfiguration\n", nil,
			[]string{`c.yaml: apiVersion "kubeproxy.config.k8s.io/v1alpha1", kind "KubeletConfiguration": want apiVersion kubeproxy.config.k8s.io/v1alpha1, kind KubeProxyConfiguration`}},
		{"no type meta is an error", "mode: ipvs\n", nil,
			[]string{`c.yaml: apiVersion "", kind "": want apiVersion kubeproxy.config.k8s.io/v1alpha1, kind KubeProxyConfiguration`}},
		{"an empty file is an error", "", nil, []string{"c.yaml: want a KubeProxyConfiguration object, got null"}},
		{"a list is an error", "- a\n", nil, []string{"c.yaml: want a KubeProxyConfiguration object, got a list"}},
		{"a YAML syntax error names the line", typeMeta + "ipvs:\n  syncPeriod: 30s\n   scheduler: rr\n", nil,
			[]string{"c.yaml: 5: mapping values are not allowed in this context"}},
		{"a JSON syntax error names the line", "{\"apiVersion\": \"x\",\n \"kind\": \"y\"]\n", nil,
			[]string{"c.yaml: 2: invalid character ']' after object key:value pair"}},

		{"a wrong type names its path", typeMeta + "clientConnection:\n  burst: many\n", nil,
			[]string{"c.yaml: clientConnection.burst: want int32, got a string"}},
		{"a number for a duration names the duration", typeMeta + "ipvs:\n  syncPeriod: 30\n", nil,
			[]string{`c.yaml: ipvs.syncPeriod: want a duration such as "30s", got a number`}},
		{"a bad duration names its path", typeMeta + "ipvs:\n  tcpTimeout: 30x\n", nil,
			[]string{`c.yaml: ipvs.tcpTimeout: time: unknown unit "x" in duration "30x"`}},
		{"a bad quantity names its path", typeMeta + "logging: {options: {json: {infoBufferSize: lots}}}\n", nil,
			[]string{"c.yaml: logging.options.json.infoBufferSize: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"}},
		{"a bad flushFrequency names its path", typeMeta + "logging: {flushFrequency: true}\n", nil,
			[]string{`c.yaml: logging.flushFrequency: invalid duration "true": json: cannot unmarshal bool into Go value of type time.Duration`}},
		{"a bad map value names its key", typeMeta + "featureGates: {A: maybe}\n", nil,
			[]string{"c.yaml: featureGates.A: want bool, got a string"}},
		{"a bad list element names its index", typeMeta + "nodePortAddresses: [10.0.0.0/8, 5]\n", nil,
			[]string{"c.yaml: nodePortAddresses[1]: want string, got a number"}},
		{"a bad field of a list element names its index", typeMeta + "logging: {vmodule: [{filePattern: a}, {verbosity: high}]}\n", nil,
			[]string{"c.yaml: logging.vmodule[1].verbosity: want uint32, got a string"}},
		{"a scalar for a list is a type error", typeMeta + "nodePortAddresses: 10.0.0.0/8\n", nil,
			[]string{"c.yaml: nodePortAddresses: want a list, got a string"}},
		{"a list for an object is a type error", typeMeta + "conntrack: [1]\n", nil,
			[]string{"c.yaml: conntrack: want an object, got a list"}},
		{"an out of range number is a type error", typeMeta + "clientConnection: {burst: 3000000000}\n", nil,
			[]string{"c.yaml: clientConnection.burst: want int32, got number 3000000000"}},
		// UnmarshalStrict returns only the first bad value and, beside it,
		// no unknown fields (TestUnmarshalStrictContract); LoadConfig
		// still reports them all.
		{"several bad values are all reported, each with its path", typeMeta +
			"ipvs:\n  syncPeriod: 30\n  tcpTimeout: 30x\nclientConnection:\n  burst: many\nmode: 5\nfeatureGates: {A: maybe, B: true, C: 1}\nnodePortAddresses: {a: 1}\nconntrack: [1]\n", nil,
			[]string{
				"c.yaml: clientConnection.burst: want int32, got a string",
				"c.yaml: conntrack: want an object, got a list",
				"c.yaml: featureGates.A: want bool, got a string",
				"c.yaml: featureGates.C: want bool, got a number",
				`c.yaml: ipvs.syncPeriod: want a duration such as "30s", got a number`,
				`c.yaml: ipvs.tcpTimeout: time: unknown unit "x" in duration "30x"`,
				"c.yaml: mode: want string, got a number",
				"c.yaml: nodePortAddresses: want a list, got an object",
			}},
		{"every bad list element is reported", typeMeta + "nodePortAddresses: [10.0.0.0/8, 5, {x: 1}, primary, [a]]\n", nil,
			[]string{
				"c.yaml: nodePortAddresses[1]: want string, got a number",
				"c.yaml: nodePortAddresses[2]: want string, got an object",
				"c.yaml: nodePortAddresses[4]: want string, got a list",
			}},
		{"unknown fields are reported beside bad values", typeMeta + "ipvs: {syncPeriod: 30, foo: 1}\nbar: 2\nlogging: {vmodule: [{filePattern: x}, {filePattern: z, level: 2, verbosity: high}]}\n",
			[]string{
				"c.yaml: bar: unknown field; ignored",
				"c.yaml: ipvs.foo: unknown field; ignored",
				"c.yaml: logging.vmodule[1].level: unknown field; ignored",
			},
			[]string{
				`c.yaml: ipvs.syncPeriod: want a duration such as "30s", got a number`,
				"c.yaml: logging.vmodule[1].verbosity: want uint32, got a string",
			}},
		{"150 unknown fields beside a bad value give 150 warnings", manyUnknown + "  syncPeriod: 30\n", manyWarnings,
			[]string{`c.yaml: ipvs.syncPeriod: want a duration such as "30s", got a number`}},

		{"a long bad value is cut in the message", typeMeta + "ipvs:\n  tcpTimeout: " + strings.Repeat("9", 200) + "x\n", nil,
			[]string{`c.yaml: ipvs.tcpTimeout: time: invalid duration "` + strings.Repeat("9", 64) + `"… (201 bytes)`}},
		{"a long apiVersion is cut in the message", "apiVersion: " + strings.Repeat("v", 100) + "\nkind: KubeProxyConfiguration\n", nil,
			[]string{`c.yaml: apiVersion "` + strings.Repeat("v", 64) + `"… (100 bytes), kind "KubeProxyConfiguration": want apiVersion kubeproxy.config.k8s.io/v1alpha1, kind KubeProxyConfiguration`}},
		{"a repeated key is an error naming it and its line", typeMeta + "mode: ipvs\nmode: iptables\n", nil,
			[]string{`c.yaml: 4: key "mode" repeated`}},
		{"a repeated nested key is an error naming it and its line", "# x\n" + typeMeta + "ipvs:\n  scheduler: rr\n  syncPeriod: 1s\n  scheduler: lc\n", nil,
			[]string{`c.yaml: 7: key "scheduler" repeated`}},
		{"a key repeated in JSON is an error naming it and its line", jsonTypeMeta + ",\n \"mode\": \"ipvs\",\n \"mode\": \"\"}", nil,
			[]string{`c.yaml: 3: key "mode" repeated`}},
		{"a key repeated in a JSON list's object is an error", jsonTypeMeta + `, "logging": {"vmodule": [{"filePattern": "a"}, {"verbosity": 1, "verbosity": 2}]}}`, nil,
			[]string{`c.yaml: 1: key "verbosity" repeated`}},
		{"one key in two objects is not repeated", typeMeta + "iptables: {masqueradeAll: true}\nnftables: {masqueradeAll: true}\n", nil, nil},
		{"one key in two JSON objects is not repeated", jsonTypeMeta + `, "nftables": {"masqueradeAll": true}, "iptables": {"masqueradeAll": true, "x": [{"masqueradeAll": 1}]}}`,
			[]string{"c.yaml: iptables.x: unknown field; ignored"}, nil},
		{"a file of the size limit is read", typeMeta + "#" + strings.Repeat("x", maxConfigSize-len(typeMeta)-2) + "\n", nil, nil},
		{"a file over the size limit is an error", typeMeta + "#" + strings.Repeat("x", maxConfigSize-len(typeMeta)-1) + "\n", nil,
			[]string{"c.yaml: larger than 2 MiB, the most kube-ipvs-proxy reads (a ConfigMap holds at most 1 MiB)"}},

		{"null means unset", typeMeta + "ipvs: null\nconntrack:\n  min: null\nclusterCIDR: null\nfeatureGates: null\n", nil, nil},
		{"a null duration means unset", typeMeta + "ipvs: {syncPeriod: null}\nconfigSyncPeriod: null\nlogging: {flushFrequency: null}\n", nil, nil},
		{"flushFrequency takes nanoseconds or a string", typeMeta + "logging: {flushFrequency: 1000000000}\n", nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, warnings, err := LoadConfig("c.yaml", []byte(tc.data))
			if diff := cmp.Diff(tc.wantWarnings, warnings); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
			if tc.wantErr != nil {
				if err == nil {
					t.Fatal("no error")
				}
				if diff := cmp.Diff(tc.wantErr, strings.Split(err.Error(), "\n")); diff != "" {
					t.Errorf("error lines (-want +got):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if cfg.IPVS.SyncPeriod.Duration != 30*time.Second || *cfg.Conntrack.Min != 131072 ||
				cfg.ConfigSyncPeriod.Duration != 15*time.Minute || len(cfg.FeatureGates) != 0 {
				t.Errorf("defaults not applied: %+v", cfg)
			}
		})
	}
}

// TestLoadConfigNull: null means unset for a field, a duration's too; a
// null map value is the zero value, as kube-proxy's codec (sigs.k8s.io/json)
// decodes it, so featureGates: {A: null} turns A off.
func TestLoadConfigNull(t *testing.T) {
	// kube-proxy's result, the experiment: sigs.k8s.io/json stores false
	// for A, strict or not.
	kubeProxy := map[string]bool{"A": false, "B": true}
	for _, strict := range []bool{false, true} {
		var gates map[string]bool
		var err error
		if strict {
			_, err = sigsjson.UnmarshalStrict([]byte(`{"A":null,"B":true}`), &gates, sigsjson.DisallowUnknownFields)
		} else {
			err = sigsjson.UnmarshalCaseSensitivePreserveInts([]byte(`{"A":null,"B":true}`), &gates)
		}
		if diff := cmp.Diff(kubeProxy, gates); err != nil || diff != "" {
			t.Fatalf("sigs.k8s.io/json (strict %v): %v (-want +got):\n%s", strict, err, diff)
		}
	}
	tests := []struct {
		name string
		data string
		get  func(KubeProxyConfiguration) any
		want any
	}{
		{"a null feature gate is false, as in kube-proxy", typeMeta + "featureGates: {A: null, B: true}\n",
			func(c KubeProxyConfiguration) any { return c.FeatureGates }, kubeProxy},
		{"a null feature gate is false in JSON too", `{"apiVersion": "kubeproxy.config.k8s.io/v1alpha1", "kind": "KubeProxyConfiguration", "featureGates": {"A": null}}`,
			func(c KubeProxyConfiguration) any { return c.FeatureGates }, map[string]bool{"A": false}},
		{"null featureGates is unset", typeMeta + "featureGates: null\n",
			func(c KubeProxyConfiguration) any { return c.FeatureGates }, map[string]bool{}},
		{"a null duration is unset: the default", typeMeta + "ipvs: {syncPeriod: null, scheduler: lc}\n",
			func(c KubeProxyConfiguration) any { return []any{c.IPVS.SyncPeriod.Duration, c.IPVS.Scheduler} }, []any{30 * time.Second, "lc"}},
		{"a null pointer field is unset: the default", typeMeta + "conntrack: {min: null}\n",
			func(c KubeProxyConfiguration) any { return *c.Conntrack.Min }, int32(131072)},
		{"a null section is unset: the defaults", typeMeta + "ipvs: null\n",
			func(c KubeProxyConfiguration) any { return c.IPVS }, DefaultConfig().IPVS},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, warnings, err := LoadConfig("c.yaml", []byte(tc.data))
			if err != nil || len(warnings) > 0 {
				t.Fatalf("error %v, warnings %v", err, warnings)
			}
			if diff := cmp.Diff(tc.want, tc.get(cfg), cmpOpts); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestLoadConfigDefaults: a file with only apiVersion and kind means
// DefaultConfig, and a value the file sets is kept over its default.
func TestLoadConfigDefaults(t *testing.T) {
	cfg, _, err := LoadConfig("c.yaml", []byte(typeMeta))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(DefaultConfig(), cfg, cmpOpts); diff != "" {
		t.Errorf("(-DefaultConfig +loaded):\n%s", diff)
	}
	cfg, _, err = LoadConfig("c.yaml", []byte(typeMeta+"ipvs: {syncPeriod: 1m}\nclientConnection: {qps: 7}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.IPVS.SyncPeriod.Duration != time.Minute || cfg.ClientConnection.QPS != 7 || cfg.ClientConnection.Burst != 10 {
		t.Errorf("set values or defaults lost: %+v", cfg)
	}
	if gv := kubeproxyconfig.SchemeGroupVersion.String(); gv != ConfigAPIVersion {
		t.Errorf("ConfigAPIVersion %s, k8s.io/kube-proxy says %s", ConfigAPIVersion, gv)
	}
}

// TestUnmarshalStrictContract pins what LoadConfig relies on and works
// around in sigs.k8s.io/json's UnmarshalStrict, so that an upgrade that
// changes it is noticed: every unknown field is returned with its path
// (up to 100); with a bad value it returns only the first one and no
// unknown fields; a type error names the struct field but not the map key
// below it; an error from a field's UnmarshalJSON names no field at all.
func TestUnmarshalStrictContract(t *testing.T) {
	hundredTwenty := map[string]any{}
	for i := range 120 {
		hundredTwenty[fmt.Sprintf("u%03d", i)] = 1
	}
	many, _ := json.Marshal(hundredTwenty)
	tests := []struct {
		name       string
		data       string
		wantStrict []string
		wantErr    string
	}{
		{"several unknown fields are all returned with their paths",
			`{"a":1,"ipvs":{"foo":1},"logging":{"vmodule":[{},{"level":2}]},"IPVS":{}}`,
			[]string{`unknown field "a"`, `unknown field "ipvs.foo"`, `unknown field "logging.vmodule[1].level"`, `unknown field "IPVS"`}, ""},
		{"only the first type error is returned, and no unknown fields",
			`{"a":1,"clientConnection":{"burst":"many"},"mode":5,"ipvs":{"foo":1}}`, nil,
			"json: cannot unmarshal string into Go struct field ClientConnectionConfiguration.clientConnection.burst of type int32"},
		{"a type error in a map names the map, not the key",
			`{"featureGates":{"A":"maybe"}}`, nil,
			"json: cannot unmarshal string into Go struct field KubeProxyConfiguration.featureGates of type bool"},
		{"an UnmarshalJSON error names no field",
			`{"ipvs":{"tcpTimeout":"30x"}}`, nil, `time: unknown unit "x" in duration "30x"`},
		{"null is refused for a duration",
			`{"ipvs":{"syncPeriod":null}}`, nil, `time: invalid duration ""`},
		{"at most 100 unknown fields are returned", `{"ipvs":` + string(many) + `}`, nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			strict, err := sigsjson.UnmarshalStrict([]byte(tc.data), &KubeProxyConfiguration{}, sigsjson.DisallowUnknownFields)
			var got []string
			for _, e := range strict {
				got = append(got, e.Error())
			}
			if tc.wantStrict == nil && len(got) == maxStrictErrors {
				got = nil // the limit case: only the count matters
			}
			if diff := cmp.Diff(tc.wantStrict, got); diff != "" {
				t.Errorf("strict errors (-want +got):\n%s", diff)
			}
			if gotErr := fmt.Sprint(err); (tc.wantErr == "" && err != nil) || (tc.wantErr != "" && gotErr != tc.wantErr) {
				t.Errorf("error:\n  got  %s\n  want %s", gotErr, tc.wantErr)
			}
		})
	}
}

// FuzzLoadConfig: the loader never panics, each error it reports (one a
// line) names the file, and whatever it accepts survives a write and
// reload unchanged.
func FuzzLoadConfig(f *testing.F) {
	for _, path := range []string{kubeadmConfig, tunedConfig} {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(typeMeta + "ipvs: {syncPeriod: 30}\nlogging: {flushFrequency: 7, options: {json: {infoBufferSize: 1Ki}}}\n"))
	f.Add([]byte(typeMeta + "featureGates: {a: true}\nnodePortAddresses: [primary]\nconntrack: {min: null}\n"))
	f.Add([]byte(typeMeta + "logging: {vmodule: [{filePattern: a, verbosity: 2}, null, {verbosity: x}]}\nfoo: {bar: 1}\n"))
	f.Add([]byte(typeMeta + "conntrack: [1]\nnodePortAddresses: {a: 1}\nipvs: {tcpTimeout: 1x}\n"))
	f.Add([]byte(typeMeta + "a: &x [*x]\n"))
	many := typeMeta + "featureGates: {A: null, B: 1}\nipvs.u1: 1\nipvs: {syncPeriod: null, tcpTimeout: 1x"
	for i := range 110 {
		many += fmt.Sprintf(", u%d: 1", i)
	}
	f.Add([]byte(many + "}\n"))
	f.Add([]byte("{\"apiVersion\": \"kubeproxy.config.k8s.io/v1alpha1\", \"kind\": \"KubeProxyConfiguration\", \"qps\": 1e400}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, _, err := LoadConfig("fuzz.yaml", data)
		if err != nil {
			for _, line := range strings.Split(err.Error(), "\n") {
				if !strings.HasPrefix(line, "fuzz.yaml: ") {
					t.Fatalf("an error line does not name the file: %q in %q", line, err)
				}
			}
			return
		}
		written, err := MarshalConfig(cfg)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		again, warnings, err := LoadConfig("written.yaml", written)
		if err != nil || len(warnings) > 0 {
			t.Fatalf("reload: %v %v\n%s", err, warnings, written)
		}
		rewritten, err := MarshalConfig(again)
		if err != nil || !bytes.Equal(written, rewritten) {
			t.Fatalf("not stable across a reload: %v\n%s\n---\n%s", err, written, rewritten)
		}
	})
}
