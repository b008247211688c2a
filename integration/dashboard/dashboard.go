package dashboard

import (
	_ "embed"
	"strings"
)

//go:embed kube-proxy-dashboard-metrics.txt
var fixture string

// Metrics returns the metric names the dashboard queries, in the
// fixture's order.
func Metrics() []string {
	var names []string
	for _, l := range strings.Split(fixture, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			names = append(names, l)
		}
	}
	return names
}

// Missing returns the dashboard's metrics that the Prometheus text
// exposition body lacks. "up" is Prometheus's own, the scrape's success:
// a body to check means it is there.
func Missing(body string) []string {
	var out []string
	for _, name := range Metrics() {
		if name == "up" {
			continue
		}
		if !strings.Contains(body, "\n"+name+"{") && !strings.Contains(body, "\n"+name+" ") {
			out = append(out, name)
		}
	}
	return out
}
