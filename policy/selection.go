package policy

import (
	"fmt"
	"slices"
	"strconv"
)

// selection is the destinations chosen for a set of virtual servers and
// why. Its Destinations slice is shared by those virtual servers.
type selection struct {
	dests  []Destination
	reason string
}

// hintMode is which EndpointSlice hints filter cluster endpoints.
type hintMode int

const (
	hintsNone hintMode = iota
	hintsNode
	hintsZone
)

// topologyMode decides, exactly as kube-proxy's topologyModeFromHints,
// whether node hints, zone hints or neither apply, with a note saying why
// for the reason string. Only ready endpoints are considered.
func topologyMode(cands []candidate, nodeName, zone string) (hintMode, string) {
	allNode, allZone := true, true
	forNode, forZone := false, false
	var missingZone, missingNode *candidate
	anyZone, anyNode, anyReady := false, false, false
	for i := range cands {
		c := &cands[i]
		if !c.Ready {
			continue
		}
		anyReady = true
		if len(c.ForZones()) == 0 {
			allZone = false
			if missingZone == nil {
				missingZone = c
			}
		} else {
			anyZone = true
			forZone = forZone || slices.Contains(c.ForZones(), zone)
		}
		if len(c.ForNodes()) == 0 {
			allNode = false
			if missingNode == nil {
				missingNode = c
			}
		} else {
			anyNode = true
			forNode = forNode || slices.Contains(c.ForNodes(), nodeName)
		}
	}
	if !anyReady {
		return hintsNone, ""
	}
	var nodeNote string
	switch {
	case allNode && forNode:
		return hintsNode, "node hints for " + nodeName
	case allNode:
		nodeNote = "node hints ignored: none for node " + nodeName + "; "
	case anyNode:
		nodeNote = "node hints ignored: ready endpoint " + missingNode.addrPort().String() + " has no forNodes; "
	}
	switch {
	case allZone && forZone:
		return hintsZone, nodeNote + "zone hints for " + zone
	case allZone && zone == "":
		return hintsNone, nodeNote + "zone hints ignored: node has no " + LabelTopologyZone + " label"
	case allZone:
		return hintsNone, nodeNote + "zone hints ignored: none for zone " + zone
	case anyZone:
		return hintsNone, nodeNote + "zone hints ignored: ready endpoint " + missingZone.addrPort().String() + " has no forZones"
	}
	if nodeNote != "" {
		return hintsNone, nodeNote[:len(nodeNote)-2]
	}
	return hintsNone, "no topology hints"
}

// clusterSelection is kube-proxy's cluster endpoint selection: ready
// endpoints, filtered by hints when they apply; when none remain, every
// serving-and-terminating endpoint, ignoring topology.
func clusterSelection(cands []candidate, nodeName, zone string) selection {
	mode, note := topologyMode(cands, nodeName, zone)
	var dests []Destination
	ready := 0
	for i := range cands {
		c := &cands[i]
		if !c.Ready {
			continue
		}
		ready++
		if mode == hintsNode && !slices.Contains(c.ForNodes(), nodeName) ||
			mode == hintsZone && !slices.Contains(c.ForZones(), zone) {
			continue
		}
		dests = append(dests, c.destination(1))
	}
	if len(dests) > 0 {
		if mode == hintsNone {
			return selection{dests, note + "; " + count(ready, "ready endpoint")}
		}
		return selection{dests, fmt.Sprintf("%s; %d of %s", note, len(dests), count(ready, "ready endpoint"))}
	}
	dests = filter(cands, func(c *candidate) bool { return c.Serving && c.Terminating })
	if len(dests) > 0 {
		return selection{dests, "no ready endpoints; " + count(len(dests), "serving-terminating endpoint")}
	}
	return selection{nil, "no usable endpoints"}
}

// localSelection is kube-proxy's local endpoint selection: local ready
// endpoints, else local serving-and-terminating ones, else nothing. Hints
// are ignored.
func localSelection(cands []candidate) selection {
	dests := filter(cands, func(c *candidate) bool { return c.local && c.Ready })
	if len(dests) > 0 {
		ready := 0
		for i := range cands {
			if cands[i].Ready {
				ready++
			}
		}
		return selection{dests, fmt.Sprintf("%d of %s local", len(dests), count(ready, "ready endpoint"))}
	}
	dests = filter(cands, func(c *candidate) bool { return c.local && c.Serving && c.Terminating })
	if len(dests) > 0 {
		return selection{dests, "no local ready endpoints; " + count(len(dests), "local serving-terminating endpoint")}
	}
	return selection{nil, "no local endpoints"}
}

// filter returns weight-1 destinations for the candidates keep accepts.
func filter(cands []candidate, keep func(*candidate) bool) []Destination {
	var out []Destination
	for i := range cands {
		if keep(&cands[i]) {
			out = append(out, cands[i].destination(1))
		}
	}
	return out
}

func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
