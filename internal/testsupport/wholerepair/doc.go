// Package wholerepair runs an IPVS writer's sliced repair to its end in
// one call, as the loop's periodic resync does when no slice is cut
// short, for the writer's unit tests and the VM lab's. It is test
// support: it is imported only from _test.go files.
package wholerepair
