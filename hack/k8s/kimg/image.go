package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// refNameAnnotation names an index in an OCI layout's index.json: what
// `skopeo copy oci:DIR:NAME` and containerd's importer look up.
const refNameAnnotation = "org.opencontainers.image.ref.name"

// built is one image per platform, in -platform order, and the OCI image
// index of them all.
type built struct {
	platforms []v1.Platform
	images    []v1.Image
	index     v1.ImageIndex
}

// buildAll builds the image of every -platform and the index of them.
func buildAll(o options) (*built, error) {
	created := time.Unix(0, 0).UTC()
	if o.created != "" {
		t, err := time.Parse(time.RFC3339, o.created)
		if err != nil {
			return nil, fmt.Errorf("-created %q: %w", o.created, err)
		}
		created = t.UTC()
	}
	b := &built{}
	adds := make([]mutate.IndexAddendum, 0, len(o.platforms))
	for _, s := range o.platforms {
		p, err := v1.ParsePlatform(s)
		if err != nil {
			return nil, fmt.Errorf("-platform %q: %w", s, err)
		}
		if p.OS == "" || p.Architecture == "" {
			return nil, fmt.Errorf("-platform %q: want OS/ARCH", s)
		}
		img, err := build(o.forArch(p.Architecture), *p, created)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s, err)
		}
		b.platforms = append(b.platforms, *p)
		b.images = append(b.images, img)
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: p}})
	}
	b.index = mutate.IndexMediaType(mutate.AppendManifests(empty.Index, adds...), types.OCIImageIndex)
	return b, nil
}

// forArch is o with {arch} in the -file and -rootfs sources replaced by
// arch, so that each platform's image takes its own binary.
func (o options) forArch(arch string) options {
	sub := func(l list) list {
		out := make(list, len(l))
		for i, s := range l {
			out[i] = strings.ReplaceAll(s, "{arch}", arch)
		}
		return out
	}
	o.files, o.rootfs = sub(o.files), sub(o.rootfs)
	return o
}

// archiveImage is the image of the platform -out holds: want when given,
// else kimg's own platform when it was built, else the first.
func (b *built) archiveImage(want string) (v1.Image, error) {
	if want == "" {
		for i, p := range b.platforms {
			if p.OS == runtime.GOOS && p.Architecture == runtime.GOARCH {
				return b.images[i], nil
			}
		}
		return b.images[0], nil
	}
	w, err := v1.ParsePlatform(want)
	if err != nil {
		return nil, fmt.Errorf("-out-platform %q: %w", want, err)
	}
	for i, p := range b.platforms {
		if p.Equals(*w) {
			return b.images[i], nil
		}
	}
	return nil, fmt.Errorf("-out-platform %s is not among the -platform values", want)
}

// build assembles one platform's image: the rootfs layers, then one layer
// with the files, directories and links, then the config. Nothing in it
// depends on when or where it is built: layers are sorted with zero
// mtimes, and the config's times are created.
func build(o options, p v1.Platform, created time.Time) (v1.Image, error) {
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	history := v1.History{Created: v1.Time{Time: created}, CreatedBy: "kimg"}
	layerOpts := []tarball.LayerOption{tarball.WithCompressionLevel(1), tarball.WithMediaType(types.OCILayer)}
	for _, f := range o.rootfs {
		l, err := tarball.LayerFromFile(f, layerOpts...)
		if err != nil {
			return nil, fmt.Errorf("rootfs layer %s: %w", f, err)
		}
		if img, err = mutate.Append(img, mutate.Addendum{Layer: l, History: history}); err != nil {
			return nil, err
		}
	}
	if len(o.files)+len(o.dirs)+len(o.links) > 0 {
		data, err := topLayer(o)
		if err != nil {
			return nil, err
		}
		l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(data)), nil
		}, layerOpts...)
		if err != nil {
			return nil, fmt.Errorf("top layer: %w", err)
		}
		if img, err = mutate.Append(img, mutate.Addendum{Layer: l, History: history}); err != nil {
			return nil, err
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = p.OS, p.Architecture, p.Variant
	cf.Created = v1.Time{Time: created}
	cf.Config.Entrypoint = strings.Fields(o.entrypoint)
	cf.Config.Cmd = strings.Fields(o.cmd)
	cf.Config.Env = append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, o.env...)
	cf.Config.WorkingDir = o.workdir
	cf.Config.User = o.user
	for _, kv := range o.labels {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("label %q: want KEY=VALUE", kv)
		}
		if cf.Config.Labels == nil {
			cf.Config.Labels = map[string]string{}
		}
		cf.Config.Labels[k] = v
	}
	return mutate.ConfigFile(img, cf)
}

// writeLayout writes the index as a fresh OCI image layout at o.layout,
// named by -layout-ref (default the first tag's tag) in its index.json.
// It is written beside and renamed into place, so a reader never sees a
// half-written layout and no blob of an earlier build stays in it.
func writeLayout(o options, idx v1.ImageIndex) error {
	ref := o.layoutRef
	if ref == "" {
		tag, err := name.NewTag(o.tags[0])
		if err != nil {
			return fmt.Errorf("tag %q: %w", o.tags[0], err)
		}
		ref = tag.TagStr()
	}
	tmp := o.layout + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	p, err := layout.Write(tmp, empty.Index)
	if err != nil {
		return fmt.Errorf("layout %s: %w", o.layout, err)
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{refNameAnnotation: ref})); err != nil {
		return fmt.Errorf("layout %s: %w", o.layout, err)
	}
	if err := os.RemoveAll(o.layout); err != nil {
		return err
	}
	return os.Rename(tmp, o.layout)
}
