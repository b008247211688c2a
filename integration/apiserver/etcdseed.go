package apiserver

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// An etcd seed is a copy of a stopped etcd's data dir. A test whose
// objects take long to create (every Service's ClusterIP allocation
// re-counts the IPAddresses already allocated, so loading N Services
// costs the apiserver time in the square of N) saves one once
// (SaveEtcd) and later starts from it (Options.EtcdSeed): etcd then
// holds every object the seed held. The apiserver's own state (its
// certificates, keys and ports) is new each time; what the seed holds
// must not depend on it.

// seedEtcd copies the seed into etcd's data dir before etcd starts.
func (c *Cluster) seedEtcd() error {
	if c.opts.EtcdSeed == "" {
		return nil
	}
	dst := filepath.Join(c.dir, "etcd")
	if err := os.CopyFS(dst, os.DirFS(c.opts.EtcdSeed)); err != nil {
		return fmt.Errorf("etcd seed %s: %w", c.opts.EtcdSeed, err)
	}
	// etcd wants its directories private, as it makes them.
	err := filepath.WalkDir(dst, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		return os.Chmod(path, 0o700)
	})
	if err != nil {
		return fmt.Errorf("etcd seed %s: %w", c.opts.EtcdSeed, err)
	}
	return nil
}

// SaveEtcd stops the apiserver and etcd, copies etcd's data dir to dst
// and starts both again, also when the copy failed. The copy is made
// beside dst and renamed to it at the end, so that an interrupted save
// leaves no seed; dst must not exist.
func (c *Cluster) SaveEtcd(dst string) error {
	if err := c.Stop(); err != nil {
		return err
	}
	saveErr := c.etcd.stop()
	if saveErr != nil {
		saveErr = fmt.Errorf("stop etcd to save it: %w", saveErr)
	} else {
		saveErr = copyDataDir(filepath.Join(c.dir, "etcd"), dst)
	}
	if err := c.startEtcd(); err != nil {
		return errors.Join(saveErr, err)
	}
	return errors.Join(saveErr, c.startAPIServer())
}

func copyDataDir(src, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("save etcd: %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dst), filepath.Base(dst)+".partial-")
	if err != nil {
		return fmt.Errorf("save etcd: %w", err)
	}
	defer os.RemoveAll(tmp)
	copied := filepath.Join(tmp, "etcd")
	if err := os.CopyFS(copied, os.DirFS(src)); err != nil {
		return fmt.Errorf("save etcd to %s: %w", dst, err)
	}
	if err := os.Rename(copied, dst); err != nil {
		return fmt.Errorf("save etcd to %s: %w", dst, err)
	}
	return nil
}
