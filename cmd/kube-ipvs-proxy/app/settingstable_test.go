package app

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// kubeProxyOwnFlags are kube-proxy's flags that options.go registers
// beside the table of kubeProxyFlags (and klog's -v and --vmodule).
var kubeProxyOwnFlags = []string{"config", "write-config-to", "hostname-override", "master", "cleanup", "init-only", "version", "v", "vmodule"}

// configFields are the KubeProxyConfiguration fields, as JSON paths
// (ipvs.scheduler): its sections are walked, other values are leaves.
func configFields(t reflect.Type, prefix string, out *[]string) {
	for i := range t.NumField() {
		f := t.Field(i)
		name := strings.Split(f.Tag.Get("json"), ",")[0]
		if f.Anonymous {
			if f.Type.Name() != "TypeMeta" {
				configFields(f.Type, prefix, out)
			}
			continue
		}
		if name == "" || name == "-" {
			continue
		}
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && isConfigSection(ft) {
			configFields(ft, prefix+name+".", out)
			continue
		}
		*out = append(*out, prefix+name)
	}
}

func isConfigSection(t reflect.Type) bool {
	p := t.PkgPath()
	return strings.HasSuffix(p, "kube-proxy/config/v1alpha1") || strings.HasSuffix(p, "component-base/config/v1alpha1") ||
		strings.HasSuffix(p, "logs/api/v1") && t.Name() != "TimeOrMetaDuration"
}

// TestREADMESettingsTableMatchesTheFlagSet: README's table of kube-proxy's
// settings names every kube-proxy flag we take and every
// KubeProxyConfiguration field, each once, and nothing else.
func TestREADMESettingsTableMatchesTheFlagSet(t *testing.T) {
	b, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## kube-proxy's settings\n")
	if !ok {
		t.Fatal(`README.md has no "## kube-proxy's settings" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	code := regexp.MustCompile("`([^`]+)`")
	var gotFlags, gotFields []string
	rows := map[string]string{} // flag -> what we do
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if !strings.HasPrefix(line, "| ") || len(cells) < 4 || strings.HasPrefix(strings.TrimSpace(cells[1]), "flag") {
			continue
		}
		for _, m := range code.FindAllStringSubmatch(cells[1], -1) {
			gotFlags = append(gotFlags, strings.TrimLeft(m[1], "-"))
			rows[strings.TrimLeft(m[1], "-")] = strings.TrimSpace(cells[3])
		}
		for _, m := range code.FindAllStringSubmatch(cells[2], -1) {
			gotFields = append(gotFields, m[1])
		}
		if strings.TrimSpace(cells[3]) == "" {
			t.Errorf("row %q says nothing of what we do", line)
		}
	}
	s := &flagState{cfg: newFlagConfig()}
	s.table = s.kubeProxyFlags()
	wantFlags := slices.Clone(kubeProxyOwnFlags)
	for _, f := range s.table {
		wantFlags = append(wantFlags, f.name)
	}
	checkIgnoredRows(t, s.table, rows)
	var wantFields []string
	configFields(reflect.TypeFor[KubeProxyConfiguration](), "", &wantFields)
	for _, c := range []struct {
		what      string
		got, want []string
	}{{"flags", gotFlags, wantFlags}, {"config fields", gotFields, wantFields}} {
		slices.Sort(c.got)
		slices.Sort(c.want)
		if dup := duplicates(c.got); len(dup) > 0 {
			t.Errorf("README names %s more than once: %v", c.what, dup)
		}
		got := slices.Compact(c.got)
		for _, w := range c.want {
			if !slices.Contains(got, w) {
				t.Errorf("README's settings table lacks %s %q", strings.TrimSuffix(c.what, "s"), w)
			}
		}
		for _, g := range got {
			if !slices.Contains(c.want, g) {
				t.Errorf("README's settings table names %q, which is none of kube-proxy's %s", g, c.what)
			}
		}
	}
}

// checkIgnoredRows keeps the table's word for each flag in step with
// the flag set's: a flag we act on is not "ignored" there, one we ignore
// is, and one honoured for some values only says both.
func checkIgnoredRows(t *testing.T, table []kubeProxyFlag, rows map[string]string) {
	t.Helper()
	for _, f := range table {
		row, ok := rows[f.name]
		if !ok {
			continue // reported as missing
		}
		ignored, honoured := strings.HasPrefix(row, "ignored"), strings.Contains(row, "as kube-proxy")
		switch {
		case f.ignored == "" && ignored:
			t.Errorf("README says --%s is ignored; the proxy acts on it: %q", f.name, row)
		case f.ignored != "" && f.supported == nil && !ignored:
			t.Errorf("README says the proxy acts on --%s; it is ignored (%s): %q", f.name, f.ignored, row)
		case f.supported != nil && (!honoured || !strings.Contains(row, "ignored")):
			t.Errorf("README should say which --%s values are honoured (as kube-proxy) and which ignored: %q", f.name, row)
		}
	}
}

func duplicates(sorted []string) []string {
	var out []string
	for i := 1; i < len(sorted); i++ {
		if sorted[i] == sorted[i-1] && (len(out) == 0 || out[len(out)-1] != sorted[i]) {
			out = append(out, sorted[i])
		}
	}
	return out
}
