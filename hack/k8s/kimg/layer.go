package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"
)

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
