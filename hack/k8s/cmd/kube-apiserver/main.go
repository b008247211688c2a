// Command kube-apiserver is the upstream kube-apiserver (k8s.io/kubernetes
// v1.36.3, cmd/kube-apiserver), built from the Go module so the integration
// harness (integration/apiserver) can run a real API server on loopback.
// It is the same main as upstream's cmd/kube-apiserver/apiserver.go.
package main

import (
	"os"
	_ "time/tzdata" // CronJob time zones, as upstream

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // --logging-format=json
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
