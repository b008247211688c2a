package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// fixture writes a per-architecture "binary" and SBOM and a licence into a
// temporary directory and returns options that build them into an index
// for linux/amd64 and linux/arm64, the way hack/cluster/images.sh builds
// the proxy's.
func fixture(t *testing.T) options {
	t.Helper()
	dir := t.TempDir()
	write := func(rel, data string) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, arch := range []string{"amd64", "arm64"} {
		write(arch+"/bin", "binary for "+arch)
		write(arch+"/sbom.json", `{"bomFormat":"CycloneDX","arch":"`+arch+`"}`)
	}
	write("LICENSE", "Apache License\nVersion 2.0\n")
	return options{
		tags:      list{"example.com/p:v1.2.3"},
		platforms: list{"linux/amd64", "linux/arm64"},
		files: list{dir + "/{arch}/bin:/usr/local/bin/p:0755", dir + "/{arch}/sbom.json:/usr/share/doc/p/sbom.cdx.json:0644",
			dir + "/LICENSE:/usr/share/doc/p/LICENSE:0644"},
		links:      list{"/usr/local/bin/q:p"},
		labels:     list{"org.opencontainers.image.version=v1.2.3", "org.opencontainers.image.licenses=Apache-2.0"},
		entrypoint: "/usr/local/bin/p",
		created:    "2026-11-28T10:24:37Z",
	}
}

// readFile returns the content of the file at p (no leading slash) in the
// image's flattened filesystem.
func readFile(t *testing.T, img v1.Image, p string) string {
	t.Helper()
	return readFiles(t, img, p)[p]
}

// readFiles returns the contents of the files at paths (no leading slash)
// in the image's flattened filesystem, in one pass; symbolic links as
// "-> target". It fails unless every path is there.
func readFiles(t *testing.T, img v1.Image, paths ...string) map[string]string {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	out := map[string]string{}
	for len(out) < len(paths) {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			t.Fatalf("of %v, only %d are in the image", paths, len(out))
		}
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(paths, h.Name) {
			continue
		}
		if h.Typeflag == tar.TypeSymlink {
			out[h.Name] = "-> " + h.Linkname
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = string(data)
	}
	return out
}

// TestEachPlatformGetsItsOwnFiles: the layout holds one index with an
// image per platform, each with its platform in the config and the files
// {arch} named for it, the labels, and the licence.
func TestEachPlatformGetsItsOwnFiles(t *testing.T) {
	o := fixture(t)
	o.layout = filepath.Join(t.TempDir(), "oci")
	if err := run(o, io.Discard); err != nil {
		t.Fatal(err)
	}
	idx := layoutIndex(t, o.layout, "v1.2.3")
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range im.Manifests {
		got = append(got, d.Platform.String())
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		arch := d.Platform.Architecture
		if cf.Architecture != arch || cf.OS != "linux" {
			t.Errorf("%s: config says %s/%s", d.Platform, cf.OS, cf.Architecture)
		}
		if v := cf.Config.Labels["org.opencontainers.image.version"]; v != "v1.2.3" {
			t.Errorf("%s: version label %q", d.Platform, v)
		}
		if !cf.Created.Equal(time.Date(2026, 11, 28, 10, 24, 37, 0, time.UTC)) {
			t.Errorf("%s: created %s; want -created", d.Platform, cf.Created)
		}
		if b := readFile(t, img, "usr/local/bin/p"); b != "binary for "+arch {
			t.Errorf("%s: the binary is %q", d.Platform, b)
		}
		var sbom struct{ BOMFormat, Arch string }
		if err := json.Unmarshal([]byte(readFile(t, img, "usr/share/doc/p/sbom.cdx.json")), &sbom); err != nil || sbom.Arch != arch {
			t.Errorf("%s: SBOM %+v (%v); want %s's", d.Platform, sbom, err, arch)
		}
		if l := readFile(t, img, "usr/share/doc/p/LICENSE"); l != "Apache License\nVersion 2.0\n" {
			t.Errorf("%s: LICENSE %q", d.Platform, l)
		}
	}
	if want := []string{"linux/amd64", "linux/arm64"}; !slices.Equal(got, want) {
		t.Errorf("index platforms %v; want %v", got, want)
	}
}

// layoutIndex opens the OCI layout at dir and returns the index its
// index.json names ref.
func layoutIndex(t *testing.T, dir, ref string) v1.ImageIndex {
	t.Helper()
	top, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	im, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 || im.Manifests[0].Annotations[refNameAnnotation] != ref {
		t.Fatalf("index.json holds %+v; want one index named %s", im.Manifests, ref)
	}
	idx, err := top.ImageIndex(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

// TestSameInputsSameDigest: the index's digest depends on the inputs'
// contents and -created only, not on when the files were written or when
// kimg ran; a changed input or creation time changes it.
func TestSameInputsSameDigest(t *testing.T) {
	digest := func(o options) string {
		t.Helper()
		b, err := buildAll(o)
		if err != nil {
			t.Fatal(err)
		}
		d, err := b.index.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return d.String()
	}
	o := fixture(t)
	first := digest(o)
	bin, _, _ := strings.Cut(o.forArch("arm64").files[0], ":")
	if err := os.Chtimes(bin, time.Now(), time.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if again := digest(o); again != first {
		t.Errorf("rebuilt with an input's mtime changed: %s, first %s; want the same", again, first)
	}
	later := o
	later.created = "2026-11-29T00:00:00Z"
	if d := digest(later); d == first {
		t.Errorf("another -created gave the same digest %s", d)
	}
	if err := os.WriteFile(bin, []byte("another binary"), 0o644); err != nil {
		t.Fatal(err)
	}
	if d := digest(o); d == first {
		t.Errorf("another arm64 binary gave the same digest %s", d)
	}
}

// TestArchiveHoldsTheAskedPlatform: -out writes one platform's image as a
// docker archive, the one -out-platform names, under every tag.
func TestArchiveHoldsTheAskedPlatform(t *testing.T) {
	o := fixture(t)
	o.out = filepath.Join(t.TempDir(), "p.tar")
	o.outPlatform = "linux/arm64"
	o.tags = append(o.tags, "example.com/p:lab")
	var out bytes.Buffer
	if err := run(o, &out); err != nil {
		t.Fatal(err)
	}
	b, err := buildAll(o)
	if err != nil {
		t.Fatal(err)
	}
	// A docker archive keeps the config as it is (the manifest is
	// rewritten): the config's digest names the image.
	want, _ := b.images[1].ConfigName()
	for _, tag := range o.tags {
		img := archiveImage(t, o.out, tag)
		if d, _ := img.ConfigName(); d != want {
			t.Errorf("archive's %s has config %s; want the arm64 image's %s", tag, d, want)
		}
	}
	if lines := bytes.Count(out.Bytes(), []byte("\n")); lines != 3 {
		t.Errorf("printed %q; want the index's line and one per platform", out.String())
	}
}
