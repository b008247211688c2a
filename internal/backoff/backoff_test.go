package backoff

import (
	"testing"
	"time"
)

func TestDelay(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    int
		max  time.Duration
		want time.Duration
	}{
		{"first failure", 1, time.Minute, time.Second},
		{"no failure counts as the first", 0, time.Minute, time.Second},
		{"doubles", 3, time.Minute, 4 * time.Second},
		{"capped", 10, 30 * time.Second, 30 * time.Second},
		{"max under Initial", 1, 500 * time.Millisecond, 500 * time.Millisecond},
		{"service schedule capped", 100, ServiceMax, ServiceMax},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Delay(tc.n, Initial, tc.max); got != tc.want {
				t.Errorf("Delay(%d, Initial, %v) = %v, want %v", tc.n, tc.max, got, tc.want)
			}
		})
	}
}
