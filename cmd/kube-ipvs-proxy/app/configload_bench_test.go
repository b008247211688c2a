package app

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testsupport/cputime"
)

// configMapMax is the most a ConfigMap holds (the API server's limit on
// its data), the size of the worst --config file a Deployment mounts.
const configMapMax = 1 << 20

// worstConfigs are files of about size bytes of the content that costs
// the loader most: every value bad, or every field unknown, in a map, in
// a list, and nested below a list.
func worstConfigs(size int) map[string]string {
	fill := func(head string, item func(i int) string, tail string) string {
		var b strings.Builder
		b.WriteString(typeMeta + head)
		for i := 0; b.Len() < size-len(tail); i++ {
			b.WriteString(item(i))
		}
		b.WriteString(tail)
		return b.String()
	}
	return map[string]string{
		"bad feature gates":        fill("featureGates:\n", func(i int) string { return fmt.Sprintf("  G%07d: maybe\n", i) }, ""),
		"unknown top-level fields": fill("", func(i int) string { return fmt.Sprintf("u%07d: 1\n", i) }, ""),
		"unknown fields in ipvs":   fill("ipvs:\n", func(i int) string { return fmt.Sprintf("  u%07d: 1\n", i) }, ""),
		"bad list elements":        fill("nodePortAddresses:\n", func(i int) string { return fmt.Sprintf("- %d\n", i) }, ""),
		"bad fields of list elements": fill("logging:\n  vmodule:\n", func(i int) string {
			return fmt.Sprintf("  - {filePattern: f%d, verbosity: x, u: 1}\n", i)
		}, ""),
	}
}

// BenchmarkLoadConfigWorst: a ConfigMap-sized file of the worst content
// loads in time linear in its size (the target: under a second for
// 1 MiB); the quarter size shows the slope.
func BenchmarkLoadConfigWorst(b *testing.B) {
	for _, size := range []int{configMapMax / 4, configMapMax} {
		configs := worstConfigs(size)
		for _, name := range slices.Sorted(maps.Keys(configs)) {
			data := []byte(configs[name])
			b.Run(fmt.Sprintf("%s/%dKiB", name, size>>10), func(b *testing.B) {
				b.SetBytes(int64(len(data)))
				reportCPU := cputime.Start(b)
				for b.Loop() {
					if _, _, err := LoadConfig("c.yaml", data); err == nil && !strings.Contains(name, "unknown") {
						b.Fatal("no error")
					}
				}
				reportCPU()
			})
		}
	}
}
