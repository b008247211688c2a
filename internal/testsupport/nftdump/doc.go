// Package nftdump reads one nftables table back from a kernel and prints
// it in nft.Fake's Dump format, so that a test in the VM lab can compare
// the kernel with the fake, and see the table without the nft binary.
//
// It is test support: it is imported only from _test.go files. It reads
// the kernel through google/nftables and builds the text with
// nft.Fake.Load; it never writes to a kernel and imports no client-go.
package nftdump
