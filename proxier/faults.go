package proxier

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// Faults stay where they happen. A failure confined to one service (the
// kernel refused one of its virtual servers, say a scheduler module the
// node cannot load) is that service's: the sync succeeds and is not
// marked full, the writer retries the service with its own backoff, and
// the loop counts it (Observer.ServiceFailure), logs it and puts a
// Warning Event on the Service. Only errors that leave the whole data
// plane unknown fail the sync: it is then retried with backoff (runner),
// as a full resync, at once when the failed sync was incremental. Between
// syncs the runner probes cheaply that our kernel objects still exist
// (DataPlaneWriter.Check), and a missing one triggers a full resync at
// once.

// ReasonSyncFailed is the reason of the Warning Events emitted on a
// Service whose virtual servers the data plane could not program.
const ReasonSyncFailed = "FailedToProgram"

// DefaultProbeInterval is how often, while idle, the loop checks that
// our kernel objects still exist.
const DefaultProbeInterval = 500 * time.Millisecond

// probe checks that our kernel objects still exist; true asks for a sync,
// which is full since the check made the data plane need a Resync. When
// they do, it may return the heap the last syncs freed (releaseIfQuiet).
func (p *Proxier) probe() bool {
	if err := p.dp.Check(); err != nil {
		p.log.Info("Data plane changed behind our back; resyncing now", "err", err)
		return true
	}
	p.releaseIfQuiet()
	return false
}

// reportServiceFailures counts, logs and emits Events for the per-service
// failures of the last data plane call, if the sync made one (called),
// and notes the services that recovered.
func (p *Proxier) reportServiceFailures(called bool) {
	var failures []ServiceFailure
	if called {
		failures = p.dp.ServiceFailures()
	}
	for _, f := range failures {
		p.obs.ServiceFailure(f.Reason)
		msg := f.Err.Error()
		if p.failing[f.Service] == msg {
			p.log.V(4).Info("Service still failing; retrying with backoff", "service", f.Service.String(), "reason", f.Reason, "err", f.Err)
			continue
		}
		p.failing[f.Service] = msg
		p.log.Error(f.Err, "Cannot program service; the rest of the node is synced, retrying it with backoff",
			"service", f.Service.String(), "reason", f.Reason)
		p.emitFailure(f.Service, msg)
	}
	still := map[policy.ServiceKey]bool{}
	failing := p.dp.Failing()
	for _, k := range failing {
		still[k] = true
	}
	for k := range p.failing {
		if !still[k] {
			delete(p.failing, k)
			p.log.Info("Service programmed after earlier failures", "service", k.String())
		}
	}
	p.obs.FailingServices(len(failing))
}

// emitFailure puts a Warning Event on the Service, read from the
// informer's cache (for its UID); none when it is not there any more.
func (p *Proxier) emitFailure(k policy.ServiceKey, msg string) {
	if p.cfg.Recorder == nil || p.services == nil {
		return
	}
	obj, ok, err := p.services.GetByKey(k.Namespace + "/" + k.Name)
	svc, isSvc := obj.(*convertedService)
	if err != nil || !ok || !isSvc {
		return
	}
	p.cfg.Recorder.Eventf(svc.ref(), corev1.EventTypeWarning, ReasonSyncFailed, "node %s: %s", p.cfg.NodeName, msg)
}
