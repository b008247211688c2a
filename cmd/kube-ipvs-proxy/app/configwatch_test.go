package app

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// configMapVolume lays out dir as the kubelet lays out a ConfigMap
// volume: config.conf → ..data/config.conf, ..data → a timestamped
// directory; update swaps ..data atomically and deletes the old copy.
type configMapVolume struct {
	t   *testing.T
	dir string
	gen int
}

func (v *configMapVolume) update(content string) {
	v.t.Helper()
	v.gen++
	ts := filepath.Join(v.dir, "..ts"+string(rune('0'+v.gen)))
	must(v.t, os.Mkdir(ts, 0o755))
	must(v.t, os.WriteFile(filepath.Join(ts, "config.conf"), []byte(content), 0o644))
	old, _ := os.Readlink(filepath.Join(v.dir, "..data"))
	must(v.t, os.Symlink(filepath.Base(ts), filepath.Join(v.dir, "..data_tmp")))
	must(v.t, os.Rename(filepath.Join(v.dir, "..data_tmp"), filepath.Join(v.dir, "..data")))
	if old != "" {
		must(v.t, os.RemoveAll(filepath.Join(v.dir, old)))
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestAChangedConfigFileEndsTheProxySameBytesDoNot: an edit of the
// ConfigMap (a symlink swap) and an edit in place each end the proxy
// with ErrConfigChanged, once; rewriting the same bytes, or a swap to
// the same content, does not: the callback sees only the change made
// after them.
func TestAChangedConfigFileEndsTheProxySameBytesDoNot(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(v *configMapVolume, path string)
	}{
		{"a ConfigMap update swaps ..data", func(v *configMapVolume, _ string) { v.update("mode: ipvs\nipvs: {strictARP: true}\n") }},
		{"an edit in place", func(v *configMapVolume, path string) {
			must(v.t, os.WriteFile(path, []byte("mode: ipvs\nipvs: {strictARP: true}\n"), 0o644))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			v := &configMapVolume{t: t, dir: dir}
			v.update("mode: ipvs\n")
			path := filepath.Join(dir, "config.conf")
			must(t, os.Symlink("..data/config.conf", path))
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			defer func() { cancel(); wg.Wait() }()
			var changes atomic.Int32
			got := make(chan error, 2)
			must(t, watchConfigFile(ctx, &wg, path, func(err error) {
				if changes.Load() == 0 {
					err = errors.New("ended before the content changed: " + err.Error())
				}
				got <- err
			}))
			v.update("mode: ipvs\n") // the same bytes, swapped in
			must(t, os.WriteFile(filepath.Join(dir, "unrelated"), []byte("x"), 0o644))
			changes.Add(1)
			tc.change(v, path)
			select {
			case err := <-got:
				if !errors.Is(err, ErrConfigChanged) {
					t.Fatalf("changed(%v); want ErrConfigChanged", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the change was not noticed in 10 s")
			}
		})
	}
}
