// Package e2e builds upstream's e2e suite (k8s.io/kubernetes v1.36.3,
// test/e2e) trimmed to the spec packages the lab cluster runs: network
// (the Services specs are its point) plus the framework, the suite's own
// setup (test/e2e's SynchronizedBeforeSuite) and its flags. The specs are
// upstream's, unchanged; this package only chooses which are compiled in.
//
//	hack/k8s/build.sh e2e.test     # go test -c ./e2e into .cache/k8s/bin
//
// It holds no code of its own beyond TestMain's flag handling, which
// mirrors upstream's test/e2e/e2e_test.go. It must not import anything of
// the proxy: the suite judges the proxy from outside.
package e2e
