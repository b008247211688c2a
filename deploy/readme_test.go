package deploy

import (
	"os"
	"strings"
	"testing"
)

// TestREADMEKustomizeVersion: the overlays use `patches:`, which
// kustomize knows from 3.1 (kubectl from 1.21): the README must not
// promise any older kubectl.
func TestREADMEKustomizeVersion(t *testing.T) {
	m := loadManifests(t)
	usesPatches := false
	for _, dir := range []string{baseDir, overlayDir, migrateDir, rollbackDir} {
		k := one[*kustomization](t, m, dir+"/kustomization.yaml")
		usesPatches = usesPatches || len(k.Patches) > 0
	}
	if !usesPatches {
		t.Skip("no kustomization uses patches")
	}
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(data)
	if strings.Contains(readme, "since 1.14") {
		t.Error("README promises kubectl since 1.14, whose kustomize (v2.0.3) has no patches:")
	}
	for _, w := range []string{"kubectl 1.21 or later", "kustomize 3.1 or"} {
		if !strings.Contains(readme, w) {
			t.Errorf("README lacks %q", w)
		}
	}
}
