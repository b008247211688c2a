// Package plantest builds policy plans from compact strings, for the
// tests of the kernel writers (unit tests with fakes and VM tests alike).
// It is test support: it panics on malformed specs, and it imports only
// package policy.
package plantest
