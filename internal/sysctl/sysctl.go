package sysctl

import (
	"os"
	"path/filepath"
	"strings"
)

// Files reads and writes the kernel's one-line files. A missing file is
// an error wrapping fs.ErrNotExist (ENOENT): procfs and sysfs create no
// files, so Write fails the same way.
type Files interface {
	// Read returns path's content without surrounding white space.
	Read(path string) (string, error)
	// Write writes value to path, which must exist.
	Write(path, value string) error
}

// Host is Files on the running kernel's /proc and /sys.
type Host struct{}

var _ Files = Host{}

// Read returns path's content without surrounding white space.
func (Host) Read(path string) (string, error) {
	b, err := os.ReadFile(path)
	return strings.TrimSpace(string(b)), err
}

// Write writes value to path, which must exist.
func (Host) Write(path, value string) error {
	return os.WriteFile(path, []byte(value), 0o644)
}

// procSys is where the sysctls are.
const procSys = "/proc/sys"

// Path returns the file of a sysctl key such as "net/ipv4/ip_forward"
// (a key cannot reach outside /proc/sys).
func Path(key string) string { return filepath.Join(procSys, filepath.Clean("/"+key)) }

// Key returns the sysctl key of a file under /proc/sys, and false for any
// other path.
func Key(path string) (string, bool) {
	return strings.CutPrefix(filepath.Clean(path), procSys+"/")
}
