package apiconv

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

// invalid is the error of an object with a bad field. A long value
// quoted in the message, directly or through a parser's error, is cut:
// a field can hold a value of 1 MiB and the message becomes a log line
// and an Event.
func invalid(object, field, format string, args ...any) error {
	return &policy.ObjectError{
		Warning: policy.Warning{Object: object, Field: field, Message: policy.CutQuoted(fmt.Sprintf(format, args...))},
		Err:     policy.ErrInvalid,
	}
}

func notProxied(object, format string, args ...any) error {
	return &policy.ObjectError{
		Warning: policy.Warning{Object: object, Message: policy.CutQuoted(fmt.Sprintf(format, args...))},
		Err:     policy.ErrNotProxied,
	}
}
