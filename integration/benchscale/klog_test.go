package benchscale

import (
	"regexp"
	"testing"
	"time"
)

// logDuration is a klog key="duration" pair, as time.Duration prints.
var logDuration = regexp.MustCompile(`(\w+)="([0-9][0-9.a-zµ]*)"`)

// logDurations reads the duration values of a klog line by key; values
// that are not durations are left out.
func logDurations(line string) map[string]time.Duration {
	got := map[string]time.Duration{}
	for _, m := range logDuration.FindAllStringSubmatch(line, -1) {
		if d, err := time.ParseDuration(m[2]); err == nil {
			got[m[1]] = d
		}
	}
	return got
}

// TestLogDurationsReadsTheFirstSyncLine: the proxy's "First sync done"
// line gives its elapsed and each writer's time; other values are not
// durations.
func TestLogDurationsReadsTheFirstSyncLine(t *testing.T) {
	tests := []struct {
		name string
		line string
		want map[string]time.Duration
	}{
		{
			name: "the first sync's times, in every unit time.Duration prints",
			line: `I1130 18:40:01.123456    1 sync.go:310] "First sync done" services=10000 elapsed="1m2.5s" virtualServers=12001 destinations=110000 nftables="812.3ms" ipvs="950µs"`,
			want: map[string]time.Duration{"elapsed": 62500 * time.Millisecond, "nftables": 812300 * time.Microsecond, "ipvs": 950 * time.Microsecond},
		},
		{
			name: "quoted values that are not durations are left out",
			line: `I1130 18:40:01.123456    1 sync.go:310] "First sync done" node="node-1" version="1.2.3" elapsed="4s"`,
			want: map[string]time.Duration{"elapsed": 4 * time.Second},
		},
		{
			name: "a line without durations gives none",
			line: `I1130 18:40:01.123456    1 loop.go:290] "Waiting for informer caches to sync" node="node-1"`,
			want: map[string]time.Duration{},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := logDurations(tc.line)
			if len(got) != len(tc.want) {
				t.Fatalf("logDurations = %v, want %v", got, tc.want)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("%s = %v, want %v", k, got[k], v)
				}
			}
		})
	}
}
