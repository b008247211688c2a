// Package layering owns the test of the module's import rules: the
// rules each package's doc.go states (policy/ is pure, the kernel
// libraries stay in the data-plane packages, the writers do not import
// each other or client-go, test support is imported only by tests, ...)
// checked in one place over `go list -deps`, so that a rule written in a
// doc comment cannot drift from the code. It also checks that every
// package has a doc.go.
//
// It has no code of its own and must not be imported.
package layering
