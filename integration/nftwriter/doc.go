// Package nftwriter holds the VM lab tests of package nft: the nftables
// writer against the real kernel (read-back of the table, incremental
// updates, atomic replacement, foreign tables left alone), the
// rejecting rules on real traffic, and, for each detectLocalMode, which
// pods' traffic is masqueraded and which is untracked (no IPVS needed:
// the service address is routed to another namespace). Its test files carry the integration
// build tag and run only in the VM lab (hack/vmlab/run.sh).
package nftwriter
