package ipvs

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// TestApplyAnswerRules: how the executor applies the kernel's answer to
// one change to the mirror, the drains and the stale deletions, and
// which answers are errors to report. One answer, no kernel read.
func TestApplyAnswerRules(t *testing.T) {
	k, web := key("10.96.0.10:80/TCP"), policy.ServiceKey{Namespace: "default", Name: "web"}
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	d1 := nat("10.244.1.5:8080", 1)
	for _, tc := range []struct {
		name    string
		mirror  *actual // k's mirror before the answer; nil for none
		drained bool    // d1 drains since t0-1m before the answer
		x       sent
		answer  error
		wantErr string // "" for none
		want    string // the state after
	}{
		{
			name: "an added virtual server enters the mirror as ours",
			x:    sent{op: Op{Kind: OpAddService, VS: VirtualServer{Key: k, Scheduler: "rr"}}},
			want: "mirror 10.96.0.10:80/TCP rr managed=true dests=[]",
		},
		{
			name:   "a refused add leaves the mirror without it",
			x:      sent{op: Op{Kind: OpAddService, VS: VirtualServer{Key: k, Scheduler: "rr"}}},
			answer: syscall.ENOENT, wantErr: "add virtual server 10.96.0.10:80/TCP: no such file or directory",
		},
		{
			name:   "an update changes the mirrored virtual server",
			mirror: haveVS("10.96.0.10:80/TCP", "rr"),
			x:      sent{op: Op{Kind: OpUpdateService, VS: VirtualServer{Key: k, Scheduler: "wrr"}}},
			want:   "mirror 10.96.0.10:80/TCP wrr managed=false dests=[]",
		},
		{
			name:   "deleting a virtual server already gone is done",
			mirror: haveVS("10.96.0.10:80/TCP", "rr"),
			x:      sent{op: Op{Kind: OpDeleteService, VS: VirtualServer{Key: k}}},
			answer: syscall.ESRCH,
		},
		{
			name:   "a failed deletion stays in the mirror and stale with its service, retried with it",
			mirror: haveVS("10.96.0.10:80/TCP", "rr"),
			x:      sent{op: Op{Kind: OpDeleteService, VS: VirtualServer{Key: k}}},
			answer: syscall.EPERM, wantErr: "delete virtual server 10.96.0.10:80/TCP: operation not permitted",
			want: "mirror 10.96.0.10:80/TCP rr managed=false dests=[]\nstale 10.96.0.10:80/TCP default/web",
		},
		{
			name:   "an added destination enters its virtual server's mirror",
			mirror: haveVS("10.96.0.10:80/TCP", "rr"),
			x:      sent{op: Op{Kind: OpAddDestination, VS: VirtualServer{Key: k}, Dest: d1}},
			want:   "mirror 10.96.0.10:80/TCP rr managed=false dests=[10.244.1.5:8080*1]",
		},
		{
			name:    "a destination's success for a virtual server not in the mirror is an error",
			x:       sent{op: Op{Kind: OpAddDestination, VS: VirtualServer{Key: k}, Dest: d1}},
			wantErr: "add destination 10.244.1.5:8080 of virtual server 10.96.0.10:80/TCP: virtual server missing",
		},
		{
			name:   "a drain sets weight 0 in the mirror and starts the destination's drain",
			mirror: haveVS("10.96.0.10:80/TCP", "rr", d1),
			x:      sent{op: Op{Kind: OpUpdateDestination, VS: VirtualServer{Key: k}, Dest: nat("10.244.1.5:8080", 0)}, drain: true},
			want:   "mirror 10.96.0.10:80/TCP rr managed=false dests=[10.244.1.5:8080*0]\ndraining 10.96.0.10:80/TCP 10.244.1.5:8080 since 12:00",
		},
		{
			name:   "a drain already under way keeps its start",
			mirror: haveVS("10.96.0.10:80/TCP", "rr", d1), drained: true,
			x:    sent{op: Op{Kind: OpUpdateDestination, VS: VirtualServer{Key: k}, Dest: nat("10.244.1.5:8080", 0)}, drain: true},
			want: "mirror 10.96.0.10:80/TCP rr managed=false dests=[10.244.1.5:8080*0]\ndraining 10.96.0.10:80/TCP 10.244.1.5:8080 since 11:59",
		},
		{
			name:   "a refused drain names the drain and leaves the mirror",
			mirror: haveVS("10.96.0.10:80/TCP", "rr", d1),
			x:      sent{op: Op{Kind: OpUpdateDestination, VS: VirtualServer{Key: k}, Dest: nat("10.244.1.5:8080", 0)}, drain: true},
			answer: syscall.EPERM, wantErr: "drain destination 10.244.1.5:8080 of virtual server 10.96.0.10:80/TCP: operation not permitted",
			want: "mirror 10.96.0.10:80/TCP rr managed=false dests=[10.244.1.5:8080*1]",
		},
		{
			name:   "a destination deleted, or already gone, leaves the mirror and its drain",
			mirror: haveVS("10.96.0.10:80/TCP", "rr", d1), drained: true,
			x:      sent{op: Op{Kind: OpDeleteDestination, VS: VirtualServer{Key: k}, Dest: d1}},
			answer: syscall.ENOENT,
			want:   "mirror 10.96.0.10:80/TCP rr managed=false dests=[]",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := New(Config{Now: func() time.Time { return t0 }}, NewFakeKernel(), NewFakeLinks(), NewFakeSysctls())
			if tc.mirror != nil {
				w.mirror[k] = tc.mirror
			}
			if tc.drained {
				w.setDrain(k, d1.AddrPort(), t0.Add(-time.Minute))
			}
			b := w.newBatch(t0)
			tc.x.s = &step{svc: web}
			err := b.applyAnswer(tc.x, tc.answer)
			if got := fmt.Sprint(err); (err == nil) != (tc.wantErr == "") || err != nil && got != tc.wantErr {
				t.Errorf("applyAnswer = %v, want %q", err, tc.wantErr)
			}
			if got := writerState(w); got != tc.want {
				t.Errorf("state after the answer:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

// writerState renders the Writer's mirror, stale deletions and drains.
func writerState(w *Writer) string {
	var lines []string
	for _, k := range slices.SortedFunc(maps.Keys(w.mirror), Key.Compare) {
		a := w.mirror[k]
		var ds []string
		for _, d := range a.dests {
			ds = append(ds, fmt.Sprintf("%s*%d", d.AddrPort(), d.Weight))
		}
		lines = append(lines, fmt.Sprintf("mirror %s %s managed=%v dests=[%s]", k, a.vs.Scheduler, a.managed, strings.Join(ds, " ")))
	}
	for _, k := range slices.SortedFunc(maps.Keys(w.stale), Key.Compare) {
		lines = append(lines, fmt.Sprintf("stale %s %s", k, w.stale[k]))
	}
	for _, k := range slices.SortedFunc(maps.Keys(w.draining), Key.Compare) {
		for d, since := range w.draining[k] {
			lines = append(lines, fmt.Sprintf("draining %s %s since %s", k, d, since.Format("15:04")))
		}
	}
	return strings.Join(lines, "\n")
}
