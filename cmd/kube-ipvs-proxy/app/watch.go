package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/conntrack"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/health"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/kubeclient"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/sysctl"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/metrics"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier/hostaddr"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier/leftovers"
)

// DataPlaneOpener opens the data plane Watch programs. It is called once
// the API client is configured, so a bad client configuration never
// touches the kernel.
type DataPlaneOpener func() (proxier.DataPlaneWriter, func(), error)

// Watch runs the control loop against the API server until ctx ends,
// programming the data plane open returns: the kernel in the real mode,
// nothing with --dry-run, where each synced plan is printed to stdout
// instead. It also serves /healthz and /livez, /metrics, and the
// healthCheckNodePorts, and with --profiling /debug/pprof/ on the metrics
// server.
func Watch(ctx context.Context, o *Options, open DataPlaneOpener, stdout io.Writer) error {
	logger := klog.FromContext(ctx)
	logVersion(logger)
	if err := hugePagesOff(); err != nil {
		logger.Info("Transparent huge pages stay on for the proxy's memory", "err", err)
	}
	rc := o.RunConfig()
	installClientGates(rc.FeatureGates)
	recordFeatures(ctx, rc.FeatureGates)
	restCfg, err := restConfig(rc.Client)
	if err != nil {
		return fmt.Errorf("api client: %w", err)
	}
	newAPIErrorLog(logger).install(restCfg)
	cs, err := kubeclient.New(restCfg)
	if err != nil {
		return fmt.Errorf("api client: %w", err)
	}
	md, err := metadata.NewForConfig(restCfg)
	if err != nil {
		return fmt.Errorf("metadata client: %w", err)
	}
	o.logDetectLocal(logger)
	if o.Config.DetectLocalMode == localModeNodeCIDR {
		if rc, err = o.useNodeCIDRs(ctx, cs, clock.RealClock{}, podCIDRPoll); err != nil {
			if ctx.Err() != nil && errors.Is(err, context.Canceled) {
				return nil // stopped while waiting
			}
			return err
		}
	}
	dp, closeDataPlane, err := open()
	if err != nil {
		return fmt.Errorf("open the data plane: %w", err)
	}
	defer closeDataPlane()
	recorder, stopEvents := eventRecorder(ctx, o, cs, rc.NodeName)
	defer stopEvents()

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	families := hostFamilies(rc.Policy.ClusterCIDRs, hostHasIPv6())
	reg := metrics.NewRegistry()
	if err := registerBuildInfo(reg); err != nil {
		return err
	}
	m := metrics.New(reg, families...)
	proxyHealth := health.NewProxyHealth(rc.SyncPeriod, nil, families...)
	proxyHealth.SetProbeObserver(m)
	// --dry-run touches nothing: no healthCheckNodePort listeners.
	var serviceHealth proxier.ServiceHealth
	if !o.DryRun {
		// The health check node ports serve the proxy's own families
		// (the cluster CIDRs'), not every family metrics report.
		sh := health.NewServiceHealth(logger, healthCheckAddrs(ctx, cs, rc, ipFamilies(rc.Policy.ClusterCIDRs)), proxyHealth)
		defer sh.Close()
		serviceHealth = sh
	}
	var servers sync.WaitGroup
	// The servers end with ctx: cancel it first, also on an early error
	// return, which would otherwise wait for them forever.
	defer func() { cancel(nil); servers.Wait() }()
	serve := func(s server) {
		if s.addr == "" || o.DryRun { // --dry-run opens no listener
			return
		}
		servers.Go(func() { keepServing(ctx, s, rc.BindAddressHardFail, recorder, nodeRef(rc.NodeName), cancel) })
	}
	if o.ConfigFile != "" {
		if err := watchConfigFile(ctx, &servers, o.ConfigFile, cancel); err != nil {
			return err
		}
	}
	serve(server{what: "healthz", addr: rc.HealthzBindAddress, reason: reasonHealthzFailed, run: proxyHealth.Serve})
	serve(server{what: "metrics", addr: rc.MetricsBindAddress, reason: reasonMetricsFailed, run: func(ctx context.Context, addr string) error {
		return serveMetrics(ctx, addr, servedGatherer(reg), rc.EnableProfiling, &o.Config)
	}})

	var onPlan func(policy.Plan)
	var hostAddrs proxier.HostAddresses
	if o.DryRun {
		onPlan = printPlans(logger, stdout, o)
	} else {
		hostAddrs = hostaddr.Netlink{Exclude: rc.DataPlane.Interface}
		applyOOMScoreAdj(logger, oomScoreAdjPath, rc.OOMScoreAdj)
		if err := setConntrack(ctx, rc.Conntrack, &servers); err != nil {
			return err
		}
	}
	first := newFirstSync(proxyHealth)
	if !o.DryRun {
		stuck, err := leftoverIPSets(reg)
		if err != nil {
			return err
		}
		takeOver(ctx, &servers, first.Done(), recorder, rc.NodeName, stuck, leftovers.RemoveFromHost)
	}
	p, err := proxier.New(proxier.Config{
		NodeName: rc.NodeName, Engine: rc.Policy, ServiceProxyName: rc.ServiceProxyName,
		DropExternalIPs: !gateOn(rc.FeatureGates, gateAllowServiceExternalIPs, true),
		MinSyncPeriod:   rc.MinSyncPeriod, SyncPeriod: rc.SyncPeriod, ConfigSyncPeriod: rc.ConfigSyncPeriod,
		Client: cs, MetadataClient: md, DataPlane: dp,
		Observer: m, Health: first, ServiceHealth: serviceHealth,
		Recorder: recorder, OnPlan: onPlan, HostAddresses: hostAddrs, ReleaseMemory: true,
	})
	if err != nil {
		return fmt.Errorf("configure the proxy: %w", err)
	}
	logger.Info("Starting the proxy", "node", rc.NodeName, "dryRun", o.DryRun)
	if err := p.Run(ctx); err != nil {
		return fmt.Errorf("run: %w", err)
	}
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// eventRecorder records Events through the API; with --dry-run it is nil
// and nothing is written.
func eventRecorder(ctx context.Context, o *Options, cs kubeclient.Interface, node string) (record.EventRecorder, func()) {
	if o.DryRun {
		return nil, func() {}
	}
	events := record.NewBroadcaster(record.WithContext(ctx))
	// One Event per Service problem in the cluster, not one per node.
	events.StartRecordingToSink(proxier.ClusterWideEventSink(cs.EventSink()))
	return events.NewRecorder(kubeclient.Scheme, corev1.EventSource{Component: "kube-ipvs-proxy", Host: node}), events.Shutdown
}

// restConfig is the API client configuration: the kubeconfig and master
// when given, else in-cluster.
func restConfig(c ClientConfig) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if c.Kubeconfig == "" && c.Master == "" {
		cfg, err = rest.InClusterConfig()
	} else {
		cfg, err = clientcmd.BuildConfigFromFlags(c.Master, c.Kubeconfig)
	}
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = c.QPS, c.Burst
	cfg.ContentType, cfg.AcceptContentTypes = c.ContentType, c.AcceptContentTypes
	cfg.UserAgent = "kube-ipvs-proxy"
	return cfg, nil
}

// ipFamilies are the families of the cluster CIDRs, IPv4 when none is
// given.
func ipFamilies(cidrs []string) []corev1.IPFamily {
	var fams []corev1.IPFamily
	for _, c := range cidrs {
		f := corev1.IPv4Protocol
		if strings.Contains(c, ":") {
			f = corev1.IPv6Protocol
		}
		fams = append(fams, f)
	}
	if len(fams) == 0 {
		fams = []corev1.IPFamily{corev1.IPv4Protocol}
	}
	return fams
}

// printPlans prints every synced plan, as --dry-run --objects does.
func printPlans(logger klog.Logger, w io.Writer, o *Options) func(policy.Plan) {
	var mu sync.Mutex
	return func(plan policy.Plan) {
		mu.Lock()
		defer mu.Unlock()
		if err := writePlan(w, plan, o.nftConfig(), o.Output); err != nil {
			logger.Error(err, "Failed to print the plan")
		}
	}
}

// openNop opens a data plane that programs nothing: --dry-run.
func openNop() (proxier.DataPlaneWriter, func(), error) {
	return proxier.NopDataPlane{}, func() {}, nil
}

// openKernel opens the IPVS and nftables writers.
func openKernel(cfg proxier.DataPlaneConfig) DataPlaneOpener {
	return func() (proxier.DataPlaneWriter, func(), error) {
		dp, err := proxier.NewDataPlane(cfg)
		if err != nil {
			return nil, nil, err
		}
		ctx, cancel := context.WithCancel(context.Background())
		if err := dp.WatchForeignEdits(ctx); err != nil {
			klog.Background().Info("Hand edits of our nftables table wait for the periodic repair: cannot watch nftables notifications", "err", err)
		}
		return dp, func() { cancel(); dp.Close() }, nil
	}
}

// How often, and for how long, setConntrack tries again while
// nf_conntrack is not loaded.
const (
	conntrackRetryEvery = time.Second
	conntrackRetryFor   = 2 * time.Minute
)

// setConntrack sets the conntrack sysctls, as kube-proxy does before it
// starts its proxier; a failure is fatal, as there. The sysctls exist only
// once nf_conntrack is loaded, which our nftables table does in the first
// sync: until then setConntrack retries in the background (in wg).
func setConntrack(ctx context.Context, s conntrack.Settings, wg *sync.WaitGroup) error {
	logger := klog.FromContext(ctx)
	err := conntrack.Apply(logger, sysctl.Host{}, s)
	if !errors.Is(err, conntrack.ErrNotLoaded) {
		if err != nil {
			return fmt.Errorf("set the conntrack sysctls from the configuration: %w", err)
		}
		return nil
	}
	logger.Info("Setting the conntrack sysctls once nf_conntrack is loaded", "reason", err.Error())
	wg.Go(func() {
		t := time.NewTicker(conntrackRetryEvery)
		defer t.Stop()
		deadline := time.Now().Add(conntrackRetryFor)
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			err := conntrack.Apply(logger, sysctl.Host{}, s)
			if err == nil {
				return
			}
			if !errors.Is(err, conntrack.ErrNotLoaded) || time.Now().After(deadline) {
				logger.Error(err, "Failed to set the conntrack sysctls; conntrack keeps the kernel's values")
				return
			}
		}
	})
	return nil
}
