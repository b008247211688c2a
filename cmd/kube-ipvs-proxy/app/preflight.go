package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/kubeclient"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// severity ranks a preflight finding. An error is traffic kube-proxy
// serves and we would not; a warning is traffic served differently.
type severity int

const (
	sevInfo severity = iota
	sevWarning
	sevError
)

func (s severity) String() string {
	return [...]string{"info", "warning", "ERROR"}[s]
}

// Groups of findings, printed in this order.
const (
	groupRefused   = "refused"
	groupBudget    = "budget"
	groupOwnership = "ownership"
	groupAddresses = "addresses"
	groupPolicy    = "traffic policy"
	groupOther     = "other"
	groupNode      = "node"
)

var groupOrder = []string{groupRefused, groupBudget, groupOwnership, groupAddresses, groupPolicy, groupOther, groupNode}

// finding is one line of the preflight's report.
type finding struct {
	sev     severity
	group   string
	subject string // "Service default/web", "kernel"
	message string
}

// reasonGroups sorts the engine's plan warnings by their reason. A
// reason not listed here (a rule added later) is still reported, as a
// warning in groupAddresses when its name says it is about an address,
// else in groupOther.
var reasonGroups = map[string]string{
	policy.ReasonTooManyVirtualServers:    groupBudget,
	policy.ReasonVirtualServerConflict:    groupOwnership,
	policy.ReasonNodeAddress:              groupAddresses,
	policy.ReasonClusterIPAddress:         groupAddresses,
	policy.ReasonNoTrackRefused:           groupOther,
	policy.ReasonNoTrackSharedDestination: groupOther,
}

// warningFinding classifies one engine warning. A Service over its
// budget is not served at all, and an external IP that is a node's
// address is not served under --refuse-node-address-external-ips: both
// are traffic kube-proxy serves, so errors. The rest are served, by
// another owner or without one address, so warnings.
func warningFinding(w policy.Warning, refuseNodeAddresses bool) finding {
	f := finding{sev: sevWarning, group: reasonGroups[w.Reason], subject: w.Object, message: w.Message}
	if w.Field != "" {
		f.message = w.Field + ": " + w.Message
	}
	if w.Reason != "" {
		f.message += " [" + w.Reason + "]"
	}
	if f.group == "" {
		f.group = groupOther
		if strings.Contains(w.Reason, "Address") {
			f.group = groupAddresses
		}
	}
	switch {
	case w.Reason == policy.ReasonTooManyVirtualServers:
		f.sev = sevError
	case w.Reason == policy.ReasonNodeAddress && refuseNodeAddresses:
		f.sev = sevError
	}
	return f
}

// preflightReport is what the preflight found for one node.
type preflightReport struct {
	node     string
	nodeSeen bool // a Node of that name was listed
	// hostNames are the Node's name and its Hostname addresses: the
	// names a host that is this Node goes by.
	hostNames []string
	counts    string
	findings  []finding
}

// planCluster runs the engine over objs as the proxy on o.NodeName would
// (the dry run's pipeline, planSnapshot) and reports what it would serve
// differently from kube-proxy. It reads nothing but objs.
func planCluster(o *Options, objs snapshot) (preflightReport, error) {
	r := preflightReport{node: o.NodeName}
	add := func(f finding) { r.findings = append(r.findings, f) }
	notProxiedCount := 0
	sp, err := planSnapshot(o, objs, func(p problem) {
		switch p.Kind {
		case nodeSkipped:
			add(finding{sevWarning, groupNode, "Node " + p.Object.(*corev1.Node).Name, skipped(p.Err)})
		case nodeWarning:
			add(finding{sevWarning, groupNode, p.Warning.Object, p.Warning.Message})
		case notProxied:
			notProxiedCount++ // headless, ExternalName, another proxy's: kube-proxy skips them too
		case serviceSkipped:
			s := p.Object.(*corev1.Service)
			subject := "Service " + s.Namespace + "/" + s.Name
			add(finding{sevError, groupRefused, subject, strings.TrimPrefix(p.Err.Error(), subject+": ") + "; not served"})
		case engineWarning:
			add(warningFinding(p.Warning, o.RefuseNodeAddressExternalIPs))
		case sliceSkipped, endpointLeftOut:
			s := p.Object.(*discoveryv1.EndpointSlice)
			msg := skipped(p.Err)
			if p.Kind == endpointLeftOut {
				msg = p.Err.Error() + "; endpoint left out, the slice's others kept"
			}
			add(finding{sevWarning, groupOther, "EndpointSlice " + s.Namespace + "/" + s.Name, msg})
		}
	})
	if err != nil {
		return r, err
	}
	r.nodeSeen = sp.NodeFound
	r.hostNames = nodeHostNames(objs.Nodes, o.NodeName)
	if !r.nodeSeen {
		add(finding{sevWarning, groupNode, "Node " + o.NodeName, "no such Node in the cluster (set --hostname-override): " +
			"planned without its addresses and labels, so no NodePort virtual servers and no topology"})
	}
	r.findings = append(r.findings, localPolicyFindings(sp.Plan, sp.Served, sp.LeftOut)...)
	r.counts = fmt.Sprintf("%d Services (%d not proxied, as by kube-proxy), %d EndpointSlices, %d Nodes; %d virtual servers on this node",
		len(objs.Services), notProxiedCount, len(objs.EndpointSlices), len(objs.Nodes), len(sp.Plan.VirtualServers))
	return r, nil
}

// notLocalRule is the start of policy.LeftOut's rule for an endpoint
// left out because it is on another node.
const notLocalRule = "not local"

// localPolicyFindings names the Local traffic policies this node serves
// differently from kube-proxy's IPVS mode. With no local endpoint,
// kube-proxy's IPVS mode falls back to the cluster's endpoints (its
// syncEndpoint) where a Service also uses them: iTP=Local when the
// Service is exposed with eTP=Cluster, eTP=Local under iTP=Cluster. We
// keep the policy, as its iptables and nftables modes do: the ClusterIP
// rejects, and external clients are dropped while pods and the node
// reach the external addresses through the ClusterIP (internalVia).
func localPolicyFindings(plan policy.Plan, services map[policy.ServiceKey]*policy.Service, leftOut func(*policy.VirtualServer) []policy.LeftOut) []finding {
	type key struct {
		svc      policy.ServiceKey
		external bool
	}
	seen := map[key]bool{}
	var out []finding
	for i := range plan.VirtualServers {
		vs := &plan.VirtualServers[i]
		svc := services[vs.Service]
		k := key{vs.Service, vs.Kind.External()}
		if svc == nil || vs.TrafficPolicy != policy.PolicyLocal || len(vs.Destinations) > 0 || seen[k] {
			continue
		}
		elsewhere := 0
		for _, l := range leftOut(vs) {
			if strings.HasPrefix(l.Rule, notLocalRule) {
				elsewhere++
			}
		}
		if elsewhere == 0 {
			continue // no endpoint anywhere: kube-proxy has none either
		}
		seen[k] = true
		subject := "Service " + vs.Service.String()
		switch {
		case !k.external && (svc.ExternalLocal || !exposed(svc)):
			// kube-proxy uses no cluster endpoints then: the same.
		case !k.external:
			out = append(out, finding{sevWarning, groupPolicy, subject, fmt.Sprintf(
				"iTP=Local, no local endpoint on this node (%d elsewhere): its ClusterIP rejects here; "+
					"kube-proxy's IPVS mode, the Service being also exposed with eTP=Cluster, falls back to those endpoints", elsewhere)})
		case !svc.InternalLocal:
			out = append(out, finding{sevWarning, groupPolicy, subject, fmt.Sprintf(
				"eTP=Local, no local endpoint on this node (%d elsewhere): external clients are dropped here, "+
					"pods and the node go through the ClusterIP; kube-proxy's IPVS mode falls back to those endpoints for every client, losing the client address", elsewhere)})
		}
	}
	return out
}

// exposed reports whether svc is reachable from outside the cluster:
// kube-proxy's ExternallyAccessible.
func exposed(svc *policy.Service) bool {
	return len(svc.ExternalIPs) > 0 || len(svc.LoadBalancerIPs) > 0 ||
		slices.ContainsFunc(svc.Ports, func(p policy.ServicePort) bool { return p.NodePort != 0 })
}

// Preflight lists the cluster once, plans this node as the proxy would,
// checks the node's kernel when it runs on that node, and prints the
// findings. It exits 1 on an error finding (traffic kube-proxy serves
// that we would not), and with --strict on a warning too.
// root is the host's file system, for the kernel checks; forward reads
// its FORWARD policies.
func Preflight(ctx context.Context, o *Options, root fs.FS, forward ForwardReader, stdout, stderr io.Writer) int {
	objs, err := listCluster(ctx, o)
	if err != nil {
		fmt.Fprintf(stderr, "kube-ipvs-proxy: --preflight: %v\n", err)
		return ExitError
	}
	r, err := planCluster(o, objs)
	if err != nil {
		fmt.Fprintf(stderr, "kube-ipvs-proxy: --preflight: %v\n", err)
		return ExitError
	}
	r.findings = append(r.findings, hostFindings(r, o.Config.IPVS.Scheduler, root)...)
	if r.nodeSeen && onNode(root) {
		r.findings = append(r.findings, forwardFindings(forward, uint32(1)<<o.nftConfig().MasqueradeBit)...)
	}
	return r.write(stdout, o.PreflightStrict)
}

// hostFindings are the kernel checks of this host, made only where the
// host is the Node planned: elsewhere (an operator's workstation, a CI
// runner) its kernel says nothing about the node's, and checking it
// would fail the preflight on a kernel the proxy never runs on.
func hostFindings(r preflightReport, scheduler string, root fs.FS) []finding {
	if !r.nodeSeen || !onNode(root) || !isHost(root, r.hostNames) {
		return []finding{{sevInfo, groupNode, "kernel", "not checked: run the preflight on the node (this host is not Node " + r.node + ", or has no /proc and /sys)"}}
	}
	return kernelFindings(root, scheduler)
}

// nodeHostNames is the named Node's name and its Hostname addresses.
func nodeHostNames(nodes []*corev1.Node, name string) []string {
	names := []string{name}
	for _, n := range nodes {
		if n.Name != name {
			continue
		}
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeHostName {
				names = append(names, a.Address)
			}
		}
	}
	return names
}

// listCluster lists Services, EndpointSlices and Nodes once, through the
// proxy's API client and configuration.
func listCluster(ctx context.Context, o *Options) (snapshot, error) {
	var objs snapshot
	restCfg, err := restConfig(o.RunConfig().Client)
	if err != nil {
		return objs, fmt.Errorf("api client: %w", err)
	}
	cs, err := kubeclient.New(restCfg)
	if err != nil {
		return objs, fmt.Errorf("api client: %w", err)
	}
	if err := listInto(ctx, cs.Services(nil), "services", func(l *corev1.ServiceList) {
		for i := range l.Items {
			objs.Services = append(objs.Services, &l.Items[i])
		}
	}); err != nil {
		return objs, err
	}
	if err := listInto(ctx, cs.EndpointSlices(nil), "endpointslices", func(l *discoveryv1.EndpointSliceList) {
		for i := range l.Items {
			objs.EndpointSlices = append(objs.EndpointSlices, &l.Items[i])
		}
	}); err != nil {
		return objs, err
	}
	err = listInto(ctx, cs.Nodes(nil), "nodes", func(l *corev1.NodeList) {
		for i := range l.Items {
			objs.Nodes = append(objs.Nodes, &l.Items[i])
		}
	})
	return objs, err
}

// listInto lists every page of lw and gives each list to add.
func listInto[L runtime.Object](ctx context.Context, lw cache.ListerWatcher, what string, add func(L)) error {
	opts := metav1.ListOptions{Limit: 500}
	for {
		obj, err := cache.ToListerWatcherWithContext(lw).ListWithContext(ctx, opts)
		if err != nil {
			return fmt.Errorf("list %s: %w", what, err)
		}
		l, ok := obj.(L)
		if !ok {
			return fmt.Errorf("list %s: got %T", what, obj)
		}
		add(l)
		m, err := metaList(obj)
		if err != nil {
			return fmt.Errorf("list %s: %w", what, err)
		}
		if m.GetContinue() == "" {
			return nil
		}
		opts.Continue = m.GetContinue()
	}
}

func metaList(obj runtime.Object) (metav1.ListInterface, error) {
	m, ok := obj.(metav1.ListInterface)
	if !ok {
		return nil, fmt.Errorf("%T is not a list", obj)
	}
	return m, nil
}

// write prints the findings grouped, one a line, then the summary, and
// returns the exit code.
func (r preflightReport) write(w io.Writer, strict bool) int {
	var b strings.Builder
	fmt.Fprintf(&b, "preflight for node %s: %s\n", r.node, r.counts)
	count := map[severity]int{}
	// Errors first in each group, then warnings, then the rest, each in
	// the order found: Services in the API's order (namespace, name).
	findings := slices.Clone(r.findings)
	slices.SortStableFunc(findings, func(a, b finding) int { return int(b.sev) - int(a.sev) })
	for _, g := range groupOrder {
		var lines []string
		for _, f := range findings {
			if f.group == g {
				count[f.sev]++
				lines = append(lines, fmt.Sprintf("  %-7s %s: %s\n", f.sev, f.subject, f.message))
			}
		}
		if len(lines) > 0 {
			fmt.Fprintf(&b, "%s:\n%s", g, strings.Join(lines, ""))
		}
	}
	failed := count[sevError] > 0 || (strict && count[sevWarning] > 0)
	verdict := "PASS"
	if failed {
		verdict = "FAIL"
	}
	why := ""
	switch {
	case count[sevError] > 0:
		why = ": traffic kube-proxy serves would not be served"
	case failed:
		why = ": --strict fails on warnings"
	}
	fmt.Fprintf(&b, "preflight %s: %d errors, %d warnings%s\n", verdict, count[sevError], count[sevWarning], why)
	if _, err := io.WriteString(w, b.String()); err != nil {
		return ExitError
	}
	if failed {
		return ExitError
	}
	return ExitOK
}

// preflightKubeconfig is --kubeconfig when it wins over the --config
// file's clientConnection.kubeconfig: with --preflight, which runs where
// the admin's credentials are, not where the file's path points (a pod's
// mount); "" otherwise.
func (o *Options) preflightKubeconfig(flags *pflag.FlagSet, s *flagState) string {
	if !o.Preflight || o.ConfigFile == "" || !flags.Changed("kubeconfig") {
		return ""
	}
	return s.cfg.ClientConnection.Kubeconfig
}

// validatePreflight checks the flags --preflight combines with: it reads
// the cluster, not --objects, and touches no kernel state.
func (o *Options) validatePreflight() []error {
	var errs []error
	if o.PreflightStrict && !o.Preflight {
		errs = append(errs, errors.New("--strict needs --preflight"))
	}
	if !o.Preflight {
		return errs
	}
	for flag, set := range map[string]bool{"--dry-run": o.DryRun, "--objects": len(o.Objects) > 0, "--cleanup": o.Cleanup, "--init-only": o.InitOnly} {
		if set {
			errs = append(errs, fmt.Errorf("--preflight takes no %s (it lists the cluster once and changes nothing)", flag))
		}
	}
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errs
}
