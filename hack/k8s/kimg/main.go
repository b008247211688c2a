package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// list is a repeatable string flag.
type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

// options are kimg's flags.
type options struct {
	out, push, workdir, user       string
	entrypoint, cmd                string
	tags, rootfs, files, dirs, env list
	labels                         list
	links                          list
}

func main() {
	var o options
	flag.StringVar(&o.out, "out", "", "write a docker-archive tarball here")
	flag.StringVar(&o.push, "push", "", "also push the image to this reference")
	flag.Var(&o.tags, "tag", "image reference to tag the archive with (repeatable; the first is the image's name)")
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
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintf(os.Stderr, "kimg: %v\n", err)
		os.Exit(1)
	}
}

func run(o options) error {
	if len(o.tags) == 0 {
		return errors.New("at least one -tag is required")
	}
	if o.out == "" && o.push == "" {
		return errors.New("one of -out or -push is required")
	}
	img, err := build(o)
	if err != nil {
		return err
	}
	if o.out != "" {
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
		if err := os.Rename(tmp, o.out); err != nil {
			return err
		}
	}
	if o.push != "" {
		ref, err := name.ParseReference(o.push)
		if err != nil {
			return fmt.Errorf("push reference %q: %w", o.push, err)
		}
		if err := remote.Write(ref, img, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
			return fmt.Errorf("push %s: %w", o.push, err)
		}
	}
	d, err := img.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("%s %s\n", o.tags[0], d)
	return nil
}

// build assembles the image: the rootfs layers, then one layer with the
// files, directories and links, then the config.
func build(o options) (v1.Image, error) {
	img := empty.Image
	for _, f := range o.rootfs {
		l, err := tarball.LayerFromFile(f, tarball.WithCompressionLevel(1))
		if err != nil {
			return nil, fmt.Errorf("rootfs layer %s: %w", f, err)
		}
		if img, err = mutate.AppendLayers(img, l); err != nil {
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
		}, tarball.WithCompressionLevel(1))
		if err != nil {
			return nil, fmt.Errorf("top layer: %w", err)
		}
		if img, err = mutate.AppendLayers(img, l); err != nil {
			return nil, err
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Created = v1.Time{Time: time.Unix(0, 0).UTC()}
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

// entry is one tar entry of the top layer.
type entry struct {
	hdr  tar.Header
	data []byte
}

// topLayer is an uncompressed tar of the -file, -dir and -link entries and
// their parent directories, sorted by path, owned by root, mtime zero.
func topLayer(o options) ([]byte, error) {
	entries := map[string]entry{}
	addParents := func(p string) {
		for d := path.Dir(p); d != "/" && d != "."; d = path.Dir(d) {
			if _, ok := entries[d]; !ok {
				entries[d] = entry{hdr: tar.Header{Typeflag: tar.TypeDir, Mode: 0o755}}
			}
		}
	}
	for _, spec := range o.files {
		parts := strings.Split(spec, ":")
		if len(parts) < 2 || len(parts) > 3 {
			return nil, fmt.Errorf("-file %q: want SRC:DST[:MODE]", spec)
		}
		data, err := os.ReadFile(parts[0])
		if err != nil {
			return nil, fmt.Errorf("-file %q: %w", spec, err)
		}
		st, err := os.Stat(parts[0])
		if err != nil {
			return nil, err
		}
		mode := int64(st.Mode().Perm())
		if len(parts) == 3 {
			if mode, err = strconv.ParseInt(parts[2], 8, 32); err != nil {
				return nil, fmt.Errorf("-file %q: mode: %w", spec, err)
			}
		}
		dst := path.Clean("/" + parts[1])
		addParents(dst)
		entries[dst] = entry{hdr: tar.Header{Typeflag: tar.TypeReg, Mode: mode, Size: int64(len(data))}, data: data}
	}
	for _, spec := range o.dirs {
		dst, modeStr, _ := strings.Cut(spec, ":")
		mode := int64(0o755)
		if modeStr != "" {
			var err error
			if mode, err = strconv.ParseInt(modeStr, 8, 32); err != nil {
				return nil, fmt.Errorf("-dir %q: mode: %w", spec, err)
			}
		}
		dst = path.Clean("/" + dst)
		addParents(dst)
		entries[dst] = entry{hdr: tar.Header{Typeflag: tar.TypeDir, Mode: mode}}
	}
	for _, spec := range o.links {
		dst, target, ok := strings.Cut(spec, ":")
		if !ok || target == "" {
			return nil, fmt.Errorf("-link %q: want DST:TARGET", spec)
		}
		dst = path.Clean("/" + dst)
		addParents(dst)
		entries[dst] = entry{hdr: tar.Header{Typeflag: tar.TypeSymlink, Linkname: target, Mode: 0o777}}
	}
	paths := make([]string, 0, len(entries))
	for p := range entries {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range paths {
		e := entries[p]
		e.hdr.Name = strings.TrimPrefix(p, "/")
		if e.hdr.Typeflag == tar.TypeDir {
			e.hdr.Name += "/"
		}
		e.hdr.ModTime = time.Unix(0, 0)
		e.hdr.Format = tar.FormatPAX
		if err := tw.WriteHeader(&e.hdr); err != nil {
			return nil, fmt.Errorf("tar %s: %w", p, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, fmt.Errorf("tar %s: %w", p, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
