package ipvs

import (
	"os"
	"path/filepath"
	"strings"
)

// procSysctls is Sysctls over /proc/sys.
type procSysctls struct{}

var _ Sysctls = procSysctls{}

func sysctlPath(key string) string { return filepath.Join("/proc/sys", filepath.Clean("/"+key)) }

func (procSysctls) Get(key string) (string, error) {
	b, err := os.ReadFile(sysctlPath(key))
	return strings.TrimSpace(string(b)), err
}

func (procSysctls) Set(key, value string) error {
	return os.WriteFile(sysctlPath(key), []byte(value), 0o644)
}
