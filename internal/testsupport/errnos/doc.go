// Package errnos names the answers of a kernel seam, or of its fake, by
// their errno ("ok", "ENOENT", "EEXIST"), so that a test compares a batch's
// answers, one per request, as one line of text.
//
// It is test support, imported only from _test.go files. It must not
// import any package of this module: it is errors, syscall and
// golang.org/x/sys/unix only.
package errnos
