package benchscale

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"time"
)

// The knobs, as environment variables. The host half reads them (make
// bench-scale passes them through) and hands them to the VM half in
// VMLAB_ENV.
const (
	// EnvServices is the list of scales, e.g. "1000 10000" (host only;
	// each scale is its own apiserver and VM boot).
	EnvServices = "KIP_BENCH_SCALE_SERVICES"
	// EnvBase is a second proxy to measure against the tree's: a git
	// revision (built from `git archive`) or a binary's path.
	EnvBase = "KIP_BENCH_SCALE_BASE"

	// envVMServices is the one scale of a VM boot.
	envVMServices = "KIP_BENCH_SCALE_VM_SERVICES"
	// envVMProxies lists the binaries in the VM: label=/path,label=/path.
	envVMProxies = "KIP_BENCH_SCALE_VM_PROXIES"
	// envVMVsKubeProxy (1) makes the VM half make bench-vs-kube-proxy's
	// comparison, not make bench-scale's phases.
	envVMVsKubeProxy = "KIP_BENCH_VS_KUBE_PROXY_VM"
)

// Phases sizes the measurement; the zero value of a field takes its
// default (DefaultPhases).
type Phases struct {
	Rounds      int           // measurements of each proxy, interleaved (KIP_BENCH_SCALE_ROUNDS)
	Idle        time.Duration // the idle window, ≥ 2 periodic resyncs (KIP_BENCH_SCALE_IDLE, seconds)
	Changes     int           // sequential endpoint changes (KIP_BENCH_SCALE_CHANGES)
	Burst       int           // endpoint changes written at once (KIP_BENCH_SCALE_BURST)
	NewServices int           // services created and deleted (KIP_BENCH_SCALE_NEW_SERVICES)
	// ChurnRate endpoint changes a second for ChurnSeconds, each to
	// another service (KIP_BENCH_SCALE_CHURN_RATE, _CHURN_SECONDS).
	ChurnRate, ChurnSeconds int
	// Profile (1) runs the proxy with enableProfiling and reports its heap
	// profile after the cold start and at the end, its CPU profile in
	// windows through the cold start, the services' creates and deletes,
	// the churn and the restart, an execution trace 20 s into a cold
	// start that lasts longer, and the writer floor's CPU profile, to set
	// beside the cold start's sync
	// (KIP_BENCH_SCALE_PROFILE; the host writes them next to the console
	// log as <stamp>-<N>-<proxy>-<round>-<when>.heap.pprof, .cpu.pprof or
	// .trace).
	Profile int
	// FirstSyncWait (seconds, 0 for as long as it takes) bounds how long
	// make bench-vs-kube-proxy waits for a proxy's own first sync once its
	// table is complete: kube-proxy's takes tens of minutes at 10,000
	// services under TCG. A run that reaches it reports the wait as a
	// lower bound and measures no endpoint change
	// (KIP_BENCH_SCALE_FIRST_SYNC_WAIT).
	FirstSyncWait int
	// TableWait (seconds, 0 for the default bound, past which the run
	// fails) bounds how long make bench-vs-kube-proxy waits for a proxy's
	// IPVS table from its start: kube-proxy's takes many minutes at tens
	// of thousands of services under TCG. A run that reaches it reports
	// the wait, the CPU and the peak RSS by then as lower bounds and
	// measures nothing after (KIP_BENCH_SCALE_TABLE_WAIT).
	TableWait int
}

// DefaultPhases are the sizes `make bench-scale` uses.
var DefaultPhases = Phases{Rounds: 1, Idle: 65 * time.Second, Changes: 100, Burst: 500, NewServices: 50,
	ChurnRate: 20, ChurnSeconds: 60}

var phaseEnv = []struct {
	name string
	get  func(*Phases) *int
}{
	{"KIP_BENCH_SCALE_ROUNDS", func(p *Phases) *int { return &p.Rounds }},
	{"KIP_BENCH_SCALE_CHANGES", func(p *Phases) *int { return &p.Changes }},
	{"KIP_BENCH_SCALE_BURST", func(p *Phases) *int { return &p.Burst }},
	{"KIP_BENCH_SCALE_NEW_SERVICES", func(p *Phases) *int { return &p.NewServices }},
	{"KIP_BENCH_SCALE_CHURN_RATE", func(p *Phases) *int { return &p.ChurnRate }},
	{"KIP_BENCH_SCALE_CHURN_SECONDS", func(p *Phases) *int { return &p.ChurnSeconds }},
	{"KIP_BENCH_SCALE_PROFILE", func(p *Phases) *int { return &p.Profile }},
	{"KIP_BENCH_SCALE_FIRST_SYNC_WAIT", func(p *Phases) *int { return &p.FirstSyncWait }},
	{"KIP_BENCH_SCALE_TABLE_WAIT", func(p *Phases) *int { return &p.TableWait }},
}

const envIdle = "KIP_BENCH_SCALE_IDLE"

// PhasesFromEnv reads the knobs that are set over DefaultPhases.
func PhasesFromEnv() (Phases, error) {
	p := DefaultPhases
	for _, e := range phaseEnv {
		if v := os.Getenv(e.name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return p, fmt.Errorf("%s=%q: want a count", e.name, v)
			}
			*e.get(&p) = n
		}
	}
	if v := os.Getenv(envIdle); v != "" {
		s, err := strconv.Atoi(v)
		if err != nil || s < 0 {
			return p, fmt.Errorf("%s=%q: want seconds", envIdle, v)
		}
		p.Idle = time.Duration(s) * time.Second
	}
	if p.Rounds < 1 || p.NewServices > MaxNewServices {
		return p, fmt.Errorf("rounds %d (want ≥ 1), new services %d (want ≤ %d)", p.Rounds, p.NewServices, MaxNewServices)
	}
	return p, nil
}

// Env renders the phases for VMLAB_ENV.
func (p Phases) Env() []string {
	var out []string
	for _, e := range phaseEnv {
		out = append(out, fmt.Sprintf("%s=%d", e.name, *e.get(&p)))
	}
	return append(out, fmt.Sprintf("%s=%d", envIdle, int(p.Idle/time.Second)))
}

// RoundOrder is the order in which round (from 0) measures the proxies:
// as given in even rounds, reversed in odd ones, so that no proxy always
// runs first in its round and whatever the order itself costs falls on
// each alike.
func RoundOrder[T any](proxies []T, round int) []T {
	if round%2 == 0 {
		return proxies
	}
	r := slices.Clone(proxies)
	slices.Reverse(r)
	return r
}
