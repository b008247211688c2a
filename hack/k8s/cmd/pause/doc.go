// Command pause is the lab's pod sandbox process, tagged as
// registry.k8s.io/pause (the kubelet's and containerd's sandbox image):
// it holds the pod's namespaces, reaps the zombies it inherits as PID 1,
// and exits 0 on SIGINT or SIGTERM. It is ours because the lab has no
// registry to pull upstream's from; it needs nothing but the Go runtime.
package main
