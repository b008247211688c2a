// Command coredns is CoreDNS (github.com/coredns/coredns, from the Go
// module proxy) with only the plugins the lab's cluster DNS uses, the
// way CoreDNS documents custom builds: its server with a shorter
// directive list, and the plugin packages imported for registration. The
// lab's Corefile (hack/cluster/manifests/coredns.yaml) must use only
// these plugins; e2e needs cluster DNS even for the Services specs. bind
// is for the node variant nodelocaldns (hack/cluster/nodelocaldns.sh),
// whose node-local cache listens on 169.254.20.10 only.
package main
