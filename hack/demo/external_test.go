//go:build integration

package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// The service examples/lb.yaml exposes with eTP=Local, and the endpoint
// section 4 gives it on node-a.
const (
	lbNamespace, lbService = "shop", "checkout"
	whyNoLocal             = "eTP=Local without local endpoints"
)

var localCheckoutPod = netip.MustParseAddr("10.244.1.30")

// fromOutside: the external clients to node-a's NodePorts, the load
// balancer addresses and the healthCheckNodePort.
func (d *demo) fromOutside(admin kubernetes.Interface) {
	l := d.lab
	section("3. From outside the cluster to the NodePorts on %s's Node addresses and to the load balancer:\n"+
		"    client (%s, %s), and client-lb (%s, inside checkout's loadBalancerSourceRanges)", nodeName, l.ext.v4, l.ext.v6, l.lbExt.v4)
	for _, v := range d.plan.VirtualServers {
		if v.Kind == "NodePort" && len(v.Destinations) > 0 {
			d.served(l.ext, v, masqueraded("masquerade Always: eTP=Cluster"), false)
		}
	}
	for _, v := range d.plan.VirtualServers {
		switch {
		case v.WhenEmpty != "Drop":
		case v.Kind == "LoadBalancer":
			d.dropped(l.lbExt, v, whyNoLocal, false)
			d.dropped(l.ext, v, whyNoLocal+"; its source is also outside "+strings.Join(v.SourceRanges, ","), true)
		default:
			d.dropped(l.ext, v, whyNoLocal, false)
		}
	}
	d.proxyModeIngress(admin)
	for _, hc := range d.plan.HealthChecks {
		d.healthCheck(l.ext, hc.Service, hc.NodePort, hc.LocalReadyEndpoints, false)
	}
}

// proxyModeIngress shows that a load balancer ingress with ipMode Proxy
// has no virtual server, in the plan or the kernel.
func (d *demo) proxyModeIngress(admin kubernetes.Interface) {
	svc, err := admin.CoreV1().Services(lbNamespace).Get(context.Background(), lbService, metav1.GetOptions{})
	must(d.t, err)
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if in.IPMode == nil || *in.IPMode != corev1.LoadBalancerIPModeProxy {
			continue
		}
		for _, p := range svc.Spec.Ports {
			r := &row{title: fmt.Sprintf("%s %s  %s/%s (%s)  LoadBalancer ingress with ipMode Proxy", p.Protocol,
				net.JoinHostPort(in.IP, strconv.Itoa(int(p.Port))), lbNamespace, lbService, p.Name)}
			r.add("plan", "no virtual server for an ingress with ipMode Proxy")
			for _, v := range d.plan.VirtualServers {
				if v.Address == in.IP {
					r.fail("the plan has %s", v.title(nil))
				}
			}
			_, exists, err := kernelVS(string(p.Protocol), netip.MustParseAddr(in.IP), int(p.Port))
			switch {
			case err != nil:
				r.fail("cannot read IPVS: %v", err)
			case exists:
				r.add("kernel", "an IPVS virtual server")
				r.fail("the kernel has a virtual server the plan does not")
			default:
				r.add("kernel", "no IPVS virtual server")
			}
			d.print(r)
		}
	}
}

// healthCheck asks node-a's healthCheckNodePort from c; the plan's
// local ready endpoint count decides the status. wait retries until it
// matches (after an API change: the count is then the demo's
// expectation).
func (d *demo) healthCheck(c *client, service string, port, local int, wait bool) {
	url := "http://" + net.JoinHostPort(d.lab.nodeA[0].String(), strconv.Itoa(port)) + "/healthz"
	want := 503
	if local > 0 {
		want = 200
	}
	r := &row{title: fmt.Sprintf("GET %s  %s healthCheckNodePort, from %s", url, service, c)}
	label := "plan"
	if wait {
		label = "expect"
	}
	r.add(label, "local ready endpoints: %d, so %d", local, want)
	var hc healthCheck
	var err error
	for deadline := time.Now().Add(syncLimit); ; time.Sleep(100 * time.Millisecond) {
		hc, err = getHealth(c, url)
		if !wait || err == nil && hc.code == want || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		r.add("answered", "%v", err)
		r.fail("no answer")
		d.print(r)
		return
	}
	r.add("answered", "%d, X-Load-Balancing-Endpoint-Weight: %s, %s", hc.code, hc.weight, hc.body)
	var body struct {
		Service struct {
			Namespace, Name string
		}
		LocalEndpoints      int
		ServiceProxyHealthy bool
	}
	if err := json.Unmarshal([]byte(hc.body), &body); err != nil {
		r.fail("the body is not kube-proxy's JSON: %v", err)
	}
	if hc.code != want || body.LocalEndpoints != local || !body.ServiceProxyHealthy ||
		body.Service.Namespace+"/"+body.Service.Name != service || hc.weight != strconv.Itoa(local) {
		r.fail("want %d with localEndpoints %d for %s, a healthy proxy", want, local, service)
	}
	d.print(r)
}

// localCheckout adds an endpoint on node-a to checkout's EndpointSlice,
// so that eTP=Local has a local endpoint: the client address is kept and
// the load balancer's source ranges, no longer hidden behind the drop of
// an empty virtual server, show.
func (d *demo) localCheckout(admin kubernetes.Interface) {
	l := d.lab
	section("4. What if %s had a checkout pod? The demo adds %s (%s, ready) to checkout's EndpointSlice through the API;\n"+
		"    the expected destinations are the demo's (eTP=Local: this node's ready endpoints), not a golden plan", nodeName, localCheckoutPod, nodeName)
	ctx := context.Background()
	slices := admin.DiscoveryV1().EndpointSlices(lbNamespace)
	list, err := slices.List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + lbService})
	must(d.t, err)
	if len(list.Items) == 0 {
		d.t.Fatalf("no EndpointSlice for %s/%s", lbNamespace, lbService)
	}
	s := list.Items[0]
	node, ready := nodeName, true
	s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{localCheckoutPod.String()},
		Conditions: discoveryv1.EndpointConditions{Ready: &ready}, NodeName: &node})
	l.addPodAddrs(backend{addr: localCheckoutPod, ports: s.Ports})
	start := time.Now()
	if _, err := slices.Update(ctx, &s, metav1.UpdateOptions{}); err != nil {
		d.t.Fatalf("update EndpointSlice %s/%s: %v", lbNamespace, s.Name, err)
	}

	port := int(*s.Ports[0].Port)
	var rows []planVS
	for _, v := range d.plan.VirtualServers {
		if v.Service == lbNamespace+"/"+lbService && v.TrafficPolicy == "Local" && v.addr().Is4() {
			v.Destinations = []planDest{{Address: localCheckoutPod.String(), Port: port, Weight: 1}}
			v.WhenEmpty, v.Reason, v.expected = "", "the demo expects: eTP=Local; 1 local ready endpoint", true
			rows = append(rows, v)
		}
	}
	r := &row{title: fmt.Sprintf("EndpointSlice %s/%s updated: the kernel follows", lbNamespace, s.Name)}
	for _, v := range rows {
		got, err := waitKernel(v.Protocol, v.addr(), v.Port, v.planned())
		if err != nil {
			r.fail("%s %s: %v", v.Kind, v.target(), err)
			continue
		}
		r.add("kernel", "%s %s -> %s, %v after the update", v.Kind, v.target(), strings.Join(got, ", "), time.Since(start).Round(time.Millisecond))
	}
	d.print(r)
	for _, v := range rows {
		if v.Kind == "LoadBalancer" {
			d.served(l.lbExt, v, kept(l.lbExt, "eTP=Local keeps it"), false)
			d.dropped(l.ext, v, "its source is outside loadBalancerSourceRanges "+strings.Join(v.SourceRanges, ","), true)
		} else {
			d.served(l.ext, v, kept(l.ext, "eTP=Local keeps it; source ranges only guard load balancer addresses"), false)
		}
	}
	for _, hc := range d.plan.HealthChecks {
		if hc.Service == lbNamespace+"/"+lbService {
			d.healthCheck(l.ext, hc.Service, hc.NodePort, 1, true)
		}
	}
}
