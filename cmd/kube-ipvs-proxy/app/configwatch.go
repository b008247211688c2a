package app

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/fsnotify/fsnotify"
	"k8s.io/klog/v2"
)

// ErrConfigChanged ends the proxy when its --config file changes, as
// kube-proxy ends when its own does: the restarted container reads the
// new file, and a restart changes nothing in the kernel.
var ErrConfigChanged = errors.New("the configuration file changed; exiting so that the restarted proxy reads it")

// watchConfigFile calls changed once the file at path holds other bytes
// than it did when the watch started. It watches the file's directory
// and the directory its symlinks lead to, not the file: a ConfigMap
// volume replaces the file by swapping the ..data symlink and deleting
// the old copy, which a watch on the file itself (kube-proxy's) loses. Every event in the directory re-reads the
// file, so an edit, a symlink swap and a rename over it all count; a
// file that is missing or unreadable for a moment is not a change. The
// watch ends with ctx; its goroutine is in wg.
func watchConfigFile(ctx context.Context, wg *sync.WaitGroup, path string, changed func(error)) error {
	logger := klog.FromContext(ctx)
	start, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("watch the configuration file: %w", err)
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch the configuration file: %w", err)
	}
	if err := w.Add(filepath.Dir(path)); err != nil {
		_ = w.Close()
		return fmt.Errorf("watch the configuration file's directory: %w", err)
	}
	// An edit through the symlink happens in the directory it points to.
	followTarget := func() {
		if real, err := filepath.EvalSymlinks(path); err == nil && filepath.Dir(real) != filepath.Dir(path) {
			_ = w.Add(filepath.Dir(real))
		}
	}
	followTarget()
	wg.Go(func() {
		defer func() { _ = w.Close() }()
		for {
			select {
			case <-ctx.Done():
				return
			case err, ok := <-w.Errors:
				if !ok {
					return
				}
				logger.Error(err, "Watching the configuration file", "path", path)
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				now, err := os.ReadFile(path)
				if err != nil || bytes.Equal(now, start) {
					followTarget()
					continue
				}
				logger.Info("The configuration file changed; exiting so that the restarted proxy reads it",
					"path", path, "event", ev.String())
				changed(fmt.Errorf("%s: %w", path, ErrConfigChanged))
				return
			}
		}
	})
	return nil
}
