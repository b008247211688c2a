// Command flannel is the lab's stand-in for flannel's CNI plugin
// (github.com/flannel-io/cni-plugin, which the Go module proxy here does
// not serve): the same meta-plugin contract, the one the kube-flannel
// DaemonSet's cni-conf.json names with "type": "flannel". On ADD it reads
// the lease flanneld wrote (/run/flannel/subnet.env), turns the "delegate"
// section into a bridge config whose host-local IPAM hands out addresses of
// the node's subnet and routes the whole flannel network through the
// bridge, stores that config under /var/lib/cni/flannel/<container id> and
// runs the delegate plugin with it; DEL runs the delegate with the stored
// config, so a pod created under one lease is torn down under it. IPv4
// only: the lab's flannel variant is an IPv4 cluster.
//
// delegate.go is the pure part (subnet.env in, delegate config out);
// main.go is the plugin's I/O.
package main
