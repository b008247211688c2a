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
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if !strings.HasPrefix(line, "| ") || len(cells) < 4 || strings.HasPrefix(strings.TrimSpace(cells[1]), "flag") {
			continue
		}
		for _, m := range code.FindAllStringSubmatch(cells[1], -1) {
			gotFlags = append(gotFlags, strings.TrimLeft(m[1], "-"))
		}
		for _, m := range code.FindAllStringSubmatch(cells[2], -1) {
			gotFields = append(gotFields, m[1])
		}
		if strings.TrimSpace(cells[3]) == "" {
			t.Errorf("row %q says nothing of what we do", line)
		}
	}
	s := &flagState{cfg: newFlagConfig()}
	wantFlags := slices.Clone(kubeProxyOwnFlags)
	for _, f := range s.kubeProxyFlags() {
		wantFlags = append(wantFlags, f.name)
	}
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

func duplicates(sorted []string) []string {
	var out []string
	for i := 1; i < len(sorted); i++ {
		if sorted[i] == sorted[i-1] && (len(out) == 0 || out[len(out)-1] != sorted[i]) {
			out = append(out, sorted[i])
		}
	}
	return out
}
