// Package backoff owns the proxy's one retry schedule: a first retry
// Initial after a failure (tests may start elsewhere), the delay doubling with each further
// consecutive failure, up to a maximum. The sync loop retries a failed
// sync with it (up to the sync period) and the IPVS writer a failed
// service (up to ServiceMax).
//
// It imports the standard library only.
package backoff
