package policy

import "errors"

// Sentinel errors callers branch on.
var (
	// ErrInvalid marks an object that has a field the engine cannot use.
	// The object is not applied; the previous valid version, if any, stays.
	ErrInvalid = errors.New("invalid object")
	// ErrNotProxied marks a Service this proxy deliberately ignores
	// (headless, ExternalName, another proxy's, or without a cluster IP).
	ErrNotProxied = errors.New("not proxied")
)

// Warning is a problem with one object that the engine worked around.
type Warning struct {
	Object  string // "Service default/web"
	Field   string // "metadata.annotations[kube-ipvs-proxy.io/scheduler]"; may be empty
	Message string // what is wrong and what was done instead
	// Reason classifies a plan warning about a Service, as an Event
	// reason (one of the Reason constants); empty for annotation
	// warnings, whose reason the caller knows.
	Reason string
	// Service is the Service a plan warning is about (for its Event).
	Service ServiceKey
}

// Reasons of the plan warnings about Services.
const (
	// ReasonVirtualServerConflict: another Service owns one of this
	// Service's virtual servers.
	ReasonVirtualServerConflict = "VirtualServerConflict"
	// ReasonNodeAddress: an external or load-balancer IP is a node's
	// address: served without binding it, or not served
	// (Config.RefuseNodeAddresses).
	ReasonNodeAddress = "ExternalIPIsNodeAddress"
	// ReasonClusterIPAddress: an external or load-balancer IP is a
	// Service's ClusterIP, and is not served on any port.
	ReasonClusterIPAddress = "ExternalIPIsClusterIP"
	// ReasonNoTrackSharedDestination: a NOTRACK Service shares a
	// destination with a tracked one (a guard: NoTrackRefused prevents it).
	ReasonNoTrackSharedDestination = "NoTrackSharedDestination"
	// ReasonNoTrackRefused: a NOTRACK Service shares an endpoint with a
	// tracked one, and is served tracked.
	ReasonNoTrackRefused = "NoTrackRefused"
	// ReasonTooManyVirtualServers: a Service asks for more virtual
	// servers than the per-service limit, and is not served.
	ReasonTooManyVirtualServers = "TooManyVirtualServers"
	// ReasonInvalidAddress: an external or load-balancer IP or a source
	// range does not parse, and that address alone is left out; or a
	// load-balancer IP is not served because its family's source ranges
	// were all invalid.
	ReasonInvalidAddress = "InvalidAddress"
	// ReasonRefusedAddress: an address no Service may take (loopback,
	// unspecified, link-local, multicast, broadcast) is not served, as an
	// external or load-balancer IP or as an endpoint.
	ReasonRefusedAddress = "RefusedAddress"
	// ReasonDuplicateAddress: an external or load-balancer IP is listed
	// again (in either list, in any spelling), and is served once.
	ReasonDuplicateAddress = "DuplicateAddress"
	// ReasonAddressFamilyNotServed: an external or load-balancer IP is of
	// a family the Service has no ClusterIP of, and is not served.
	ReasonAddressFamilyNotServed = "AddressFamilyNotServed"
)

func (w Warning) String() string {
	if w.Field == "" {
		return w.Object + ": " + w.Message
	}
	return w.Object + ": " + w.Field + ": " + w.Message
}

// ObjectError says why an object was not applied. It wraps ErrInvalid or
// ErrNotProxied.
type ObjectError struct {
	Warning
	Err error
}

func (e *ObjectError) Error() string { return e.Warning.String() }

// Unwrap returns the sentinel.
func (e *ObjectError) Unwrap() error { return e.Err }
