package policy

import (
	"strings"
	"testing"
)

// TestLeftOutNamesTheRule: every endpoint of a virtual server's port that
// is not a destination is listed with the rule that left it out.
func TestLeftOutNamesTheRule(t *testing.T) {
	tests := []struct {
		name string
		svc  *Service
		eps  []Endpoint
		want string // "addr:port rule", one a line
	}{
		{"a not-ready endpoint", svc("web"), []Endpoint{ep("10.244.0.1"), ep("10.244.0.2", notReady)},
			"10.244.0.2:8080 not ready"},
		{"a terminating endpoint that no longer serves", svc("web"), []Endpoint{ep("10.244.0.1"), ep("10.244.0.2", terminatingDead)},
			"10.244.0.2:8080 terminating and not serving"},
		{"a serving-terminating endpoint while another is ready", svc("web"), []Endpoint{ep("10.244.0.1"), ep("10.244.0.2", terminating)},
			"10.244.0.2:8080 serving-terminating: used only when no endpoint is ready"},
		{"a remote endpoint under iTP=Local", svc("web", internalLocal), []Endpoint{ep("10.244.0.1", local()), ep("10.244.0.2")},
			"10.244.0.2:8080 not local, and the traffic policy is Local"},
		{"an endpoint hinted for another zone", svc("web"),
			[]Endpoint{ep("10.244.0.1", zones(thisZone)), ep("10.244.0.2", zones("zone-b"))},
			"10.244.0.2:8080 topology hints: not hinted for this node or zone"},
		{"an endpoint of a later tier", svc("web", annotate(AnnotationTrafficPolicy, "PreferLocal")),
			[]Endpoint{ep("10.244.0.1", local()), ep("10.244.0.2")},
			"10.244.0.2:8080 PreferLocal: in a later tier than the destinations, or in none"},
		{"nothing left out", svc("web"), []Endpoint{ep("10.244.0.1")}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, _ := newEngine(t, world{svcs: []*Service{tc.svc}, slices: []*EndpointSlice{slice("web", "web-1", tc.eps...)}})
			plan, _ := e.Compute()
			vs := vsOf(t, plan, KindClusterIP)
			var lines []string
			for _, l := range e.LeftOut(&vs) {
				lines = append(lines, l.Endpoint.String()+" "+l.Rule)
			}
			if got := strings.Join(lines, "\n"); got != tc.want {
				t.Errorf("left out:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

// TestWriteTextSaysWhatHappensWithoutDestinations: the text plan shows
// each virtual server's masquerade and, without destinations, whether
// its traffic is rejected or dropped.
func TestWriteTextSaysWhatHappensWithoutDestinations(t *testing.T) {
	tests := []struct {
		name string
		svc  *Service
		eps  []Endpoint
		want []string
	}{
		{"no endpoint at all is rejected", svc("web"), nil,
			[]string{"masquerade Never", "(no destinations; whenEmpty Reject: new connections are rejected)"}},
		{"no local endpoint under iTP=Local is dropped", svc("web", internalLocal), []Endpoint{ep("10.244.0.2")},
			[]string{"(no destinations; whenEmpty Drop: packets are dropped)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, _ := newEngine(t, world{svcs: []*Service{tc.svc}, slices: []*EndpointSlice{slice("web", "web-1", tc.eps...)}})
			plan, _ := e.Compute()
			var b strings.Builder
			if err := plan.WriteText(&b); err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("text lacks %q:\n%s", w, b.String())
				}
			}
		})
	}
}
