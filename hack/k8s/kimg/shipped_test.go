package main

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// shippedEnv names the proxy's OCI layout to check; make image and make
// release (hack/cluster/images.sh) set it.
const shippedEnv = "KIMG_LAYOUT"

// machines are the ELF machines of the architectures the proxy ships.
var machines = map[string]elf.Machine{
	"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64, "ppc64le": elf.EM_PPC64, "s390x": elf.EM_S390,
}

// Where hack/cluster/images.sh puts things in the proxy's image.
const (
	shippedBinary  = "usr/local/bin/kube-ipvs-proxy"
	shippedAlias   = "usr/local/bin/kube-proxy"
	shippedSBOM    = "usr/share/doc/kube-ipvs-proxy/sbom.cdx.json"
	shippedLicense = "usr/share/doc/kube-ipvs-proxy/LICENSE"
	shippedCAs     = "etc/ssl/certs/ca-certificates.crt"
)

// cyclonedx is the part of a CycloneDX SBOM checked here.
type cyclonedx struct {
	BOMFormat string `json:"bomFormat"`
	Metadata  struct {
		Component struct {
			Name, Version string
		}
		Properties []struct{ Name, Value string }
	}
	Components []struct{ Name string }
}

func (b cyclonedx) property(name string) string {
	for _, p := range b.Metadata.Properties {
		if p.Name == name {
			return p.Value
		}
	}
	return ""
}

// TestShippedLayout: the proxy's image index as make image and make
// release write it holds linux/amd64 and linux/arm64 at least; each image
// has the binary built for its architecture, the version labels of the
// layout's name, a CycloneDX SBOM of exactly that binary, the repository's
// LICENSE and a CA bundle; and the host's binary says, with --version, the
// version the image is tagged with.
func TestShippedLayout(t *testing.T) {
	dir := os.Getenv(shippedEnv)
	if dir == "" {
		t.Skip(shippedEnv + " names no layout (hack/cluster/images.sh sets it)")
	}
	license, err := os.ReadFile("../../../LICENSE")
	if err != nil {
		t.Fatal(err)
	}
	top, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	tim, err := top.IndexManifest()
	if err != nil || len(tim.Manifests) != 1 {
		t.Fatalf("index.json: %v, %d entries; want one", err, len(tim.Manifests))
	}
	version := tim.Manifests[0].Annotations[refNameAnnotation]
	idx := layoutIndex(t, dir, version)
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, d := range im.Manifests {
		arch := d.Platform.Architecture
		platforms = append(platforms, d.Platform.String())
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		labels := cf.Config.Labels
		if labels["org.opencontainers.image.version"] != version || labels["org.opencontainers.image.licenses"] != "Apache-2.0" ||
			!regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(labels["org.opencontainers.image.revision"]) {
			t.Errorf("%s: labels %v; want version %s, licenses Apache-2.0 and a revision", d.Platform, labels, version)
		}
		files := readFiles(t, img, shippedBinary, shippedAlias, shippedSBOM, shippedLicense, shippedCAs)
		bin := files[shippedBinary]
		if f, err := elf.NewFile(strings.NewReader(bin)); err != nil || f.Machine != machines[arch] {
			t.Errorf("%s: the binary is not an ELF for %s (%v)", d.Platform, arch, err)
		}
		if files[shippedAlias] != "-> kube-ipvs-proxy" {
			t.Errorf("%s: %s is %q; want a link to kube-ipvs-proxy", d.Platform, shippedAlias, files[shippedAlias])
		}
		checkSBOM(t, d.Platform.String(), []byte(files[shippedSBOM]), version, arch, bin)
		if files[shippedLicense] != string(license) {
			t.Errorf("%s: %s is not the repository's LICENSE", d.Platform, shippedLicense)
		}
		if n := strings.Count(files[shippedCAs], "-----BEGIN CERTIFICATE-----"); n < 100 {
			t.Errorf("%s: %s holds %d certificates; want Debian's bundle", d.Platform, shippedCAs, n)
		}
		if arch == runtime.GOARCH {
			checkVersion(t, bin, version)
		}
	}
	for _, want := range []string{"linux/amd64", "linux/arm64"} {
		if !slices.Contains(platforms, want) {
			t.Errorf("index platforms %v; want %s among them", platforms, want)
		}
	}
}

// checkSBOM: the SBOM is CycloneDX, of the proxy at version, built for
// arch, and its binary hash is the shipped binary's.
func checkSBOM(t *testing.T, platform string, data []byte, version, arch, bin string) {
	t.Helper()
	var bom cyclonedx
	if err := json.Unmarshal(data, &bom); err != nil {
		t.Fatalf("%s: SBOM: %v", platform, err)
	}
	sum := sha256.Sum256([]byte(bin))
	if bom.BOMFormat != "CycloneDX" || bom.Metadata.Component.Version != version || len(bom.Components) == 0 ||
		bom.property("cdx:gomod:build:env:GOARCH") != arch || bom.property("cdx:gomod:binary:hash:SHA-256") != hex.EncodeToString(sum[:]) {
		t.Errorf("%s: SBOM %s %s@%s, GOARCH %s, binary %s, %d components; want CycloneDX of the shipped %s binary at %s",
			platform, bom.BOMFormat, bom.Metadata.Component.Name, bom.Metadata.Component.Version,
			bom.property("cdx:gomod:build:env:GOARCH"), bom.property("cdx:gomod:binary:hash:SHA-256"), len(bom.Components), arch, version)
	}
}

// checkVersion runs the image's binary for this host: --version says the
// version the image is named by.
func checkVersion(t *testing.T, bin, version string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kube-ipvs-proxy")
	if err := os.WriteFile(p, []byte(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(p, "--version").Output()
	if want := "kube-ipvs-proxy " + version + "\n"; err != nil || !bytes.Equal(out, []byte(want)) {
		t.Errorf("the image's binary --version: %q (%v); want %q", out, err, want)
	}
}
