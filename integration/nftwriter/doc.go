// Package nftwriter holds the VM lab tests of package nft: the nftables
// writer against the real kernel (read-back of the table, incremental
// updates, atomic replacement, foreign tables left alone) and the
// rejecting rules on real traffic. Its test files carry the integration
// build tag and run only in the VM lab (hack/vmlab/run.sh).
package nftwriter
