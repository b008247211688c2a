package app

import (
	"cmp"
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
)

// The Node Events of a health or metrics server that failed, kube-proxy's
// reasons.
const (
	reasonHealthzFailed = "FailedToStartProxierHealthcheck"
	reasonMetricsFailed = "FailedToStartMetricServer"
)

// serverRetryEvery is how soon a failed health or metrics server is
// started again when bindAddressHardFail is false, kube-proxy's period.
const serverRetryEvery = 5 * time.Second

// server is the --healthz-bind-address or --metrics-bind-address server.
type server struct {
	what, addr, reason string
	// run serves on addr until ctx ends (nil), or fails.
	run func(ctx context.Context, addr string) error
	// retryEvery is how soon it is started again after a failure; zero
	// means serverRetryEvery.
	retryEvery time.Duration
}

// keepServing runs s until ctx ends. Each failure (a port still held by a
// terminating kube-proxy, say) is a Warning Event on the Node; with
// hardFail it ends the proxy (stop, with the error), as kube-proxy's
// bindAddressHardFail, and otherwise s is started again every
// serverRetryEvery, as kube-proxy does.
func keepServing(ctx context.Context, s server, hardFail bool, recorder record.EventRecorder, node *corev1.ObjectReference, stop context.CancelCauseFunc) {
	logger := klog.FromContext(ctx).WithValues("server", s.what, "address", s.addr)
	retryEvery := cmp.Or(s.retryEvery, serverRetryEvery)
	for {
		err := s.run(ctx, s.addr)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			err = errors.New(s.what + " server returned without error")
		}
		recorder.Eventf(node, corev1.EventTypeWarning, s.reason, "%v", err)
		if hardFail {
			stop(err)
			return
		}
		logger.Error(err, "Server failed; starting it again", "retryIn", retryEvery)
		select {
		case <-ctx.Done():
			return
		case <-time.After(retryEvery):
		}
	}
}

// nodeRef is the Node the proxy's own Events are about, as kube-proxy's.
func nodeRef(name string) *corev1.ObjectReference {
	return &corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: name}
}
