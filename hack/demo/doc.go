// Package demo is `make demo`: the proxy, in its real mode inside a VM
// lab, watching a real kube-apiserver and etcd on the host that hold the
// objects of examples/, and traffic showing which backends answer.
//
// The host half (demo_test.go, KIP_DEMO=1) starts the apiserver with a
// dual-stack service range, applies deploy/base's RBAC and
// examples/*.yaml, and boots the VM (integration/vme2e.Host). The VM half
// (vm_test.go) reads the EndpointSlices back from the API and builds one
// network namespace per node that hosts endpoints (the node's pods' IPv4
// addresses on its loopback, an echo server per address and port,
// reached from this node, node-a, over a veth), starts the proxy, and
// for every IPv4 ClusterIP virtual server of examples/plans/node-a.json
// sends connections from node-a and prints the plan's destinations, the
// kernel's IPVS destinations and the backends that answered, then a few
// lines of the proxy's /metrics.
//
// The subset shown: IPv4 ClusterIP traffic from the node itself. Not
// shown: IPv6, NodePort and LoadBalancer traffic (Apply does not write
// the Nodes' addresses or the load balancer's ingress, which live in
// status), and traffic from pods or outside clients (integration/traffic
// covers those with a programmed data plane).
package demo
