package app

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/kubeclient"
)

// podCIDRPoll is how often useNodeCIDRs reads the Node while it has no
// podCIDRs.
const podCIDRPoll = time.Second

// useNodeCIDRs is detectLocalMode NodeCIDR, as kube-proxy: it waits until
// this node's Node has podCIDRs (kube-proxy waits for them too) and makes
// them what clusterCIDR otherwise is, so that traffic from this node's
// pods is local: in-cluster for masquerade, NOTRACK and eTP=Local. It
// returns the RunConfig with them. kube-proxy restarts when the podCIDRs
// change later; this proxy keeps the ones it started with. It reads the
// Node every poll (podCIDRPoll) on clk while it has none.
func (o *Options) useNodeCIDRs(ctx context.Context, cs kubeclient.Interface, clk clock.Clock, poll time.Duration) (RunConfig, error) {
	logger := klog.FromContext(ctx)
	waiting := false
	for {
		node, err := getNode(ctx, cs, o.NodeName)
		if err == nil && len(node.Spec.PodCIDRs) > 0 {
			cidrs := node.Spec.PodCIDRs
			if err := checkClusterCIDRs(cidrs); err != nil {
				return RunConfig{}, fmt.Errorf("detectLocalMode NodeCIDR: node %s's podCIDRs: %w", o.NodeName, err)
			}
			logger.Info("Detecting local traffic by the node's podCIDRs", "detectLocalMode", localModeNodeCIDR, "podCIDRs", cidrs)
			o.Config.ClusterCIDR = strings.Join(cidrs, ",")
			return o.RunConfig(), nil
		}
		if !waiting {
			logger.Info("Waiting for the node's podCIDRs", "detectLocalMode", localModeNodeCIDR, "node", o.NodeName, "err", err)
			waiting = true
		}
		select {
		case <-ctx.Done():
			return RunConfig{}, fmt.Errorf("detectLocalMode NodeCIDR: waiting for node %s's podCIDRs: %w", o.NodeName, context.Cause(ctx))
		case <-clk.After(poll):
		}
	}
}
