package apiconv

import (
	"errors"
	"strings"
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
	corev1 "k8s.io/api/core/v1"
)

// TestLongInvalidValuesAreCut: a long bad value is quoted cut to 64
// bytes with its length, as annotation values are, however the message
// quotes it.
func TestLongInvalidValuesAreCut(t *testing.T) {
	long := strings.Repeat("S", 300)
	cut := `"` + strings.Repeat("S", 64) + `"… (300 bytes)`
	tests := []struct {
		name string
		svc  *corev1.Service
		want string
	}{
		{"a long sessionAffinity", testService(func(s *corev1.Service) { s.Spec.SessionAffinity = corev1.ServiceAffinity(long) }),
			"must be None or ClientIP, got " + cut},
		{"a long externalTrafficPolicy", testService(func(s *corev1.Service) { s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicy(long) }),
			"must be Cluster or Local, got " + cut},
		{"a short value is quoted whole", testService(func(s *corev1.Service) { s.Spec.SessionAffinity = "Sticky" }),
			`must be None or ClientIP, got "Sticky"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Service(tc.svc, "")
			var oe *policy.ObjectError
			if !errors.As(err, &oe) {
				t.Fatalf("error %v, want an ObjectError", err)
			}
			if oe.Message != tc.want {
				t.Errorf("message\n got %s\nwant %s", oe.Message, tc.want)
			}
		})
	}
}
