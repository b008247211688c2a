// Package labmain is the TestMain of every VM lab test package: it refuses
// to run tests outside the VM lab, because they reconfigure the network
// stack of whatever machine runs them. Each package under integration/
// has
//
//	func TestMain(m *testing.M) { labmain.Run(m) }
//
// in a file with the integration build tag.
package labmain
