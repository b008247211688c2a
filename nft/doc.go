// Package nft will turn the Plan into one nftables table, inet
// kube-ipvs-proxy, programmed over netlink with github.com/google/nftables
// in one atomic batch per sync: NOTRACK for chosen services, masquerade
// and hairpin, reject for services without endpoints, LB source ranges and
// the host-port filter for VIP addresses. Services live in sets and maps so
// the rule count is constant.
//
// Not yet implemented: it arrives with the data plane issue. It must never
// touch another table, run the nft binary, or use iptables or ipset, and it
// makes no policy decisions.
package nft
