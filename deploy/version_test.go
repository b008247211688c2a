package deploy

import (
	"os"
	"strings"
	"testing"
)

// TestOverlayPinsTheVERSIONsTag: the example overlay (and so the rollback,
// which runs its image) pins the image tag of the release VERSION names,
// the tag `make release` writes: bumping VERSION without the overlay fails.
func TestOverlayPinsTheVERSIONsTag(t *testing.T) {
	data, err := os.ReadFile("../VERSION")
	if err != nil {
		t.Fatal(err)
	}
	want := "v" + strings.TrimSpace(string(data))
	over := one[*kustomization](t, loadManifests(t), overlayDir+"/kustomization.yaml")
	for _, im := range over.Images {
		if im.NewTag != want {
			t.Errorf("%s: image %s has newTag %q; want %q, VERSION's", overlayDir, im.Name, im.NewTag, want)
		}
	}
}
