package conntrack

import (
	"fmt"
	"io/fs"
	"maps"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2"
)

// fakeFiles is sysctl.Files over a map; a missing key is fs.ErrNotExist, and a
// write to one is refused as the kernel refuses it.
type fakeFiles struct {
	m      map[string]string
	writes []string
}

func (f *fakeFiles) Read(path string) (string, error) {
	v, ok := f.m[path]
	if !ok {
		return "", fmt.Errorf("open %s: %w", path, fs.ErrNotExist)
	}
	return v, nil
}

func (f *fakeFiles) Write(path, value string) error {
	if _, ok := f.m[path]; !ok {
		return fmt.Errorf("open %s: %w", path, fs.ErrNotExist)
	}
	f.m[path] = value
	f.writes = append(f.writes, strings.TrimPrefix(strings.TrimPrefix(path, sysctlDir), "/sys/module/nf_conntrack/parameters/")+"="+value)
	return nil
}

// kernelDefaults are Debian 6.1's values on a small VM.
func kernelDefaults() map[string]string {
	return map[string]string{
		sysctlDir + "nf_conntrack_max":                     "65536",
		sysctlDir + "nf_conntrack_tcp_timeout_established": "432000",
		sysctlDir + "nf_conntrack_tcp_timeout_close_wait":  "60",
		sysctlDir + "nf_conntrack_tcp_be_liberal":          "0",
		sysctlDir + "nf_conntrack_udp_timeout":             "30",
		sysctlDir + "nf_conntrack_udp_timeout_stream":      "120",
		hashsizeFile: "16384",
		cpusOnline:   "0-1",
	}
}

// kubeProxyDefaults are kube-proxy's defaults: on 2 CPUs, max is the
// floor, 131072.
var kubeProxyDefaults = Settings{MaxPerCore: 32 * 1024, Min: 128 * 1024, TCPEstablishedTimeout: 24 * time.Hour,
	TCPCloseWaitTimeout: time.Hour}

func TestApply(t *testing.T) {
	tests := []struct {
		name  string
		files func() map[string]string
		s     Settings
		want  []string // writes, in order
		err   string
	}{
		{"kube-proxy's defaults set max, grow the hash table and set the TCP timeouts", kernelDefaults, kubeProxyDefaults,
			[]string{"nf_conntrack_max=131072", "hashsize=32768", "nf_conntrack_tcp_timeout_established=86400", "nf_conntrack_tcp_timeout_close_wait=3600"}, ""},
		{"values already set are not written again", func() map[string]string {
			m := kernelDefaults()
			m[sysctlDir+"nf_conntrack_max"], m[hashsizeFile] = "131072", "32768"
			m[sysctlDir+"nf_conntrack_tcp_timeout_established"], m[sysctlDir+"nf_conntrack_tcp_timeout_close_wait"] = "86400", "3600"
			return m
		}, kubeProxyDefaults, nil, ""},
		{"a larger hash table is never shrunk", func() map[string]string {
			m := kernelDefaults()
			m[hashsizeFile] = "262144"
			return m
		}, Settings{MaxPerCore: 32 * 1024, Min: 128 * 1024}, []string{"nf_conntrack_max=131072"}, ""},
		{"max scales with the online CPUs", func() map[string]string {
			m := kernelDefaults()
			m[cpusOnline] = "0-7"
			return m
		}, Settings{MaxPerCore: 32 * 1024, Min: 128 * 1024}, []string{"nf_conntrack_max=262144", "hashsize=65536"}, ""},
		{"zero settings change nothing", kernelDefaults, Settings{}, nil, ""},
		{"be-liberal and the UDP timeouts", kernelDefaults,
			Settings{TCPBeLiberal: true, UDPTimeout: 10 * time.Second, UDPStreamTimeout: 2 * time.Minute},
			[]string{"nf_conntrack_udp_timeout=10", "nf_conntrack_tcp_be_liberal=1"}, ""},
		{"without nf_conntrack loaded nothing is written and ErrNotLoaded says why",
			func() map[string]string { return map[string]string{hashsizeFile: "16384"} }, kubeProxyDefaults, nil, "nf_conntrack is not loaded"},
		{"a failed write names the file", func() map[string]string {
			m := kernelDefaults()
			delete(m, sysctlDir+"nf_conntrack_tcp_timeout_close_wait")
			return m
		}, kubeProxyDefaults, []string{"nf_conntrack_max=131072", "hashsize=32768", "nf_conntrack_tcp_timeout_established=86400"},
			"set /proc/sys/net/netfilter/nf_conntrack_tcp_timeout_close_wait to 3600"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeFiles{m: tc.files()}
			before := maps.Clone(f.m)
			err := Apply(klog.Background(), f, tc.s)
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("Apply: %v, want error %q", err, tc.err)
			}
			if strings.Join(f.writes, " ") != strings.Join(tc.want, " ") {
				t.Errorf("writes %v, want %v", f.writes, tc.want)
			}
			if tc.want == nil && !maps.Equal(before, f.m) {
				t.Errorf("files changed: %v", f.m)
			}
		})
	}
}

func TestMaxForIsKubeProxys(t *testing.T) {
	tests := []struct {
		name           string
		perCore, floor int32
		cpus, want     int
	}{
		{"scaled by the CPUs", 32768, 131072, 8, 262144},
		{"at least the floor", 32768, 131072, 2, 131072},
		{"capped at 1Mi", 32768, 0, 64, 1 << 20},
		{"0 per core leaves it", 0, 131072, 8, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := MaxFor(tc.perCore, tc.floor, tc.cpus); got != tc.want {
				t.Errorf("MaxFor(%d, %d, %d) = %d, want %d", tc.perCore, tc.floor, tc.cpus, got, tc.want)
			}
		})
	}
}

func TestCPUsCountsTheOnlineList(t *testing.T) {
	tests := []struct {
		online string
		want   int
	}{
		{"0", 1}, {"0-1", 2}, {"0-3,8,10-11", 7},
	}
	for _, tc := range tests {
		if got := CPUs(&fakeFiles{m: map[string]string{cpusOnline: tc.online}}); got != tc.want {
			t.Errorf("CPUs(%q) = %d, want %d", tc.online, got, tc.want)
		}
	}
	for _, bad := range []string{"", "x", "3-1"} {
		if _, ok := countCPUList(bad); ok {
			t.Errorf("countCPUList(%q) accepted", bad)
		}
	}
}

func FuzzCountCPUList(f *testing.F) {
	for _, s := range []string{"0", "0-1", "0-3,8,10-11", "", "-", "1-"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if n, ok := countCPUList(s); ok && n < 1 {
			t.Errorf("countCPUList(%q) = %d, ok", s, n)
		}
	})
}
