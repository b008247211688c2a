package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// list is a repeatable string flag.
type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

// options are kimg's flags.
type options struct {
	out, outPlatform, layout, layoutRef string
	push, workdir, user, created        string
	entrypoint, cmd                     string
	tags, rootfs, files, dirs, env      list
	labels, links, platforms            list
}

func main() {
	var o options
	flag.StringVar(&o.out, "out", "", "write a docker-archive tarball of one platform's image here")
	flag.StringVar(&o.outPlatform, "out-platform", "", "the platform -out holds (default: kimg's own if built, else the first -platform)")
	flag.StringVar(&o.layout, "layout", "", "write the image index (every -platform) as an OCI image layout directory here")
	flag.StringVar(&o.layoutRef, "layout-ref", "", "the index's org.opencontainers.image.ref.name in the layout (default: the first -tag's tag)")
	flag.StringVar(&o.push, "push", "", "also push the image (the index, with several -platform) to this reference")
	flag.Var(&o.tags, "tag", "image reference to tag the archive with (repeatable; the first is the image's name)")
	flag.Var(&o.platforms, "platform", "OS/ARCH[/VARIANT] to build for (repeatable; default kimg's own); {arch} in a -file or -rootfs source is its ARCH")
	flag.Var(&o.rootfs, "rootfs", "an uncompressed or gzipped root filesystem tarball, one layer each (repeatable, in order)")
	flag.Var(&o.files, "file", "SRC:DST[:MODE] a host file into the top layer (repeatable; MODE octal, default the file's)")
	flag.Var(&o.dirs, "dir", "DST[:MODE] an empty directory in the top layer (repeatable; default 0755)")
	flag.Var(&o.links, "link", "DST:TARGET a symbolic link in the top layer (repeatable)")
	flag.Var(&o.env, "env", "NAME=VALUE in the image config (repeatable)")
	flag.Var(&o.labels, "label", "KEY=VALUE label in the image config, e.g. org.opencontainers.image.version (repeatable)")
	flag.StringVar(&o.entrypoint, "entrypoint", "", "entrypoint, space separated")
	flag.StringVar(&o.cmd, "cmd", "", "cmd, space separated")
	flag.StringVar(&o.workdir, "workdir", "", "working directory")
	flag.StringVar(&o.user, "user", "", "user (e.g. 0)")
	flag.StringVar(&o.created, "created", "", "the config's creation time, RFC 3339 (default the Unix epoch), e.g. the commit's time")
	flag.Parse()
	if err := run(o, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "kimg: %v\n", err)
		os.Exit(1)
	}
}

// run builds what o asks for and prints "<first tag> <digest>": the
// index's when there are several platforms or a layout, then one
// "<platform> <digest>" line per image; else the one image's.
func run(o options, stdout io.Writer) error {
	if len(o.tags) == 0 {
		return errors.New("at least one -tag is required")
	}
	if o.out == "" && o.push == "" && o.layout == "" {
		return errors.New("one of -out, -layout or -push is required")
	}
	if len(o.platforms) == 0 {
		o.platforms = list{"linux/" + runtime.GOARCH}
	}
	b, err := buildAll(o)
	if err != nil {
		return err
	}
	multi := len(b.images) > 1 || o.layout != ""
	if o.out != "" {
		if err := writeArchive(o, b); err != nil {
			return err
		}
	}
	if o.layout != "" {
		if err := writeLayout(o, b.index); err != nil {
			return err
		}
	}
	if o.push != "" {
		if err := push(o.push, b, multi); err != nil {
			return err
		}
	}
	if !multi {
		d, err := b.images[0].Digest()
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s %s\n", o.tags[0], d)
		return nil
	}
	d, err := b.index.Digest()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s %s\n", o.tags[0], d)
	for i, p := range b.platforms {
		d, err := b.images[i].Digest()
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s %s\n", p, d)
	}
	return nil
}

// writeArchive writes the -out-platform image as a docker archive under
// every -tag, through a temporary file so a reader never sees half of it.
func writeArchive(o options, b *built) error {
	img, err := b.archiveImage(o.outPlatform)
	if err != nil {
		return err
	}
	refs := map[name.Reference]v1.Image{}
	for _, t := range o.tags {
		tag, err := name.NewTag(t)
		if err != nil {
			return fmt.Errorf("tag %q: %w", t, err)
		}
		refs[tag] = img
	}
	tmp := o.out + ".tmp"
	if err := tarball.MultiRefWriteToFile(tmp, refs); err != nil {
		return fmt.Errorf("write %s: %w", o.out, err)
	}
	return os.Rename(tmp, o.out)
}

func push(ref string, b *built, multi bool) error {
	r, err := name.ParseReference(ref)
	if err != nil {
		return fmt.Errorf("push reference %q: %w", ref, err)
	}
	auth := remote.WithAuthFromKeychain(authn.DefaultKeychain)
	if multi {
		err = remote.WriteIndex(r, b.index, auth)
	} else {
		err = remote.Write(r, b.images[0], auth)
	}
	if err != nil {
		return fmt.Errorf("push %s: %w", ref, err)
	}
	return nil
}
