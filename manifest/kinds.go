package manifest

import (
	"strings"
	"sync"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// builtinKinds are the kinds of Kubernetes' built-in API groups, and of
// the two APIs every cluster serves besides them. An object of another
// kind is a custom resource or a typo (`kind: Servcie`): it is skipped
// with a warning rather than silently.
var builtinKinds = sync.OnceValue(func() map[string]bool {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		admissionregistrationv1.AddToScheme, appsv1.AddToScheme, authenticationv1.AddToScheme,
		authorizationv1.AddToScheme, autoscalingv1.AddToScheme, autoscalingv2.AddToScheme, batchv1.AddToScheme,
		certificatesv1.AddToScheme, coordinationv1.AddToScheme, corev1.AddToScheme, discoveryv1.AddToScheme,
		eventsv1.AddToScheme, flowcontrolv1.AddToScheme, networkingv1.AddToScheme, nodev1.AddToScheme,
		policyv1.AddToScheme, rbacv1.AddToScheme, resourcev1.AddToScheme, schedulingv1.AddToScheme,
		storagev1.AddToScheme,
	} {
		if err := add(s); err != nil {
			panic(err) // the API packages' own registrations
		}
	}
	kinds := map[string]bool{"CustomResourceDefinition": true, "APIService": true}
	for gvk := range s.AllKnownTypes() {
		kinds[gvk.Kind] = true
	}
	return kinds
})

// unknownKindMessage is the warning for an object whose kind is not
// built in, with the kind we read that it resembles, if any.
func unknownKindMessage(kind string) string {
	msg := "kind " + kind + " is not a built-in Kubernetes kind"
	for known := range knownKinds {
		if strings.EqualFold(kind, known) || editDistance(kind, known) <= 2 {
			msg += " (" + known + "?)"
			break
		}
	}
	return msg + "; skipped"
}

// editDistance is the Levenshtein distance between a and b, bytes as
// letters.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
