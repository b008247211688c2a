// Package httpservetest owns the test of a server whose lifecycle is
// httpserve.Serve's: start it on a free loopback address, get one path
// once it listens, cancel its context and require it to return nil. The
// health, metrics and httpserve tests share it.
//
// It is imported only from _test.go files and imports net/http and
// testing only.
package httpservetest
