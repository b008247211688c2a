package sysctl

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestPathAndKey(t *testing.T) {
	for _, tc := range []struct {
		key, path string
	}{
		{"net/ipv4/ip_forward", "/proc/sys/net/ipv4/ip_forward"},
		{"../../etc/passwd", "/proc/sys/etc/passwd"},
		{"/net/ipv4/vs/conntrack", "/proc/sys/net/ipv4/vs/conntrack"},
	} {
		t.Run(tc.key, func(t *testing.T) {
			if got := Path(tc.key); got != tc.path {
				t.Errorf("Path(%q) = %q, want %q", tc.key, got, tc.path)
			}
			if k, ok := Key(Path(tc.key)); !ok || Path(k) != tc.path {
				t.Errorf("Key(%q) = %q, %v", tc.path, k, ok)
			}
		})
	}
	if k, ok := Key("/sys/module/nf_conntrack/parameters/hashsize"); ok {
		t.Errorf("Key of a /sys file = %q, true; want false", k)
	}
}

func TestHostReadsTrimmed(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, []byte(" 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if v, err := (Host{}).Read(p); err != nil || v != "1" {
		t.Errorf("Read = %q, %v; want \"1\"", v, err)
	}
	if _, err := (Host{}).Read(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Read of a missing file: %v, want fs.ErrNotExist", err)
	}
	if err := (Host{}).Write(p, "2"); err != nil {
		t.Fatal(err)
	}
	if v, _ := (Host{}).Read(p); v != "2" {
		t.Errorf("after Write, Read = %q", v)
	}
}
