package backoff

import "time"

// Initial is the delay before the first retry.
const Initial = time.Second

// ServiceMax bounds the delay between the retries of one failed service.
const ServiceMax = 2 * time.Minute

// Delay returns the delay before the retry after the n-th consecutive
// failure (n ≥ 1): initial, doubled n-1 times, at most max. A max under
// initial is the delay for every n; n < 1 counts as 1.
func Delay(n int, initial, max time.Duration) time.Duration {
	d := initial
	for i := 1; i < n && d < max; i++ {
		d *= 2
	}
	return min(d, max)
}
