// Package bench holds the data-plane benchmarks run in the VM lab (`make
// bench-vm`): initial IPVS programming of 1k and 10k virtual servers ×
// 10 destinations against ipvsadm -R, the cost of one endpoint change at
// 1k and 10k services, and the nftables table with 10k services against
// nft -f of the same ruleset. Absolute times under TCG mean little; the
// ratios measured in one VM run are what BENCHMARKS.md records.
package bench
