package kubeapi

import (
	"fmt"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// Labels read when converting.
const (
	LabelServiceProxyName = "service.kubernetes.io/service-proxy-name"
	LabelServiceName      = "kubernetes.io/service-name"
)

// ObjectName renders "Kind namespace/name", or "Kind name" for
// cluster-scoped objects, as every message names objects.
func ObjectName(kind, namespace, name string) string {
	if namespace == "" {
		return kind + " " + name
	}
	return kind + " " + namespace + "/" + name
}

func invalid(object, field, format string, args ...any) error {
	return &policy.ObjectError{
		Warning: policy.Warning{Object: object, Field: field, Message: fmt.Sprintf(format, args...)},
		Err:     policy.ErrInvalid,
	}
}

func notProxied(object, format string, args ...any) error {
	return &policy.ObjectError{
		Warning: policy.Warning{Object: object, Message: fmt.Sprintf(format, args...)},
		Err:     policy.ErrNotProxied,
	}
}
