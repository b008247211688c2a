package main

import (
	"bufio"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// lease is what flanneld wrote into subnet.env for this node.
type lease struct {
	network *net.IPNet // FLANNEL_NETWORK: the whole overlay
	subnet  *net.IPNet // FLANNEL_SUBNET: this node's share, its gateway address first
	mtu     int        // FLANNEL_MTU: the VXLAN device's MTU
	ipMasq  bool       // FLANNEL_IPMASQ: flanneld masquerades, so the bridge must not
}

// parseLease reads subnet.env's KEY=VALUE lines. Unknown keys (the IPv6
// ones among them) are ignored; a missing or malformed IPv4 key is an error
// naming it.
func parseLease(text string) (lease, error) {
	vals := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return lease{}, fmt.Errorf("subnet.env: line %q is not KEY=VALUE", line)
		}
		vals[k] = v
	}
	var l lease
	var err error
	for _, f := range []struct {
		key string
		dst **net.IPNet
	}{{"FLANNEL_NETWORK", &l.network}, {"FLANNEL_SUBNET", &l.subnet}} {
		v, ok := vals[f.key]
		if !ok {
			return lease{}, fmt.Errorf("subnet.env: no %s", f.key)
		}
		ip, n, perr := net.ParseCIDR(v)
		if perr != nil {
			return lease{}, fmt.Errorf("subnet.env: %s=%q: %w", f.key, v, perr)
		}
		n.IP = ip // keep the gateway address FLANNEL_SUBNET carries
		*f.dst = n
	}
	if l.mtu, err = strconv.Atoi(vals["FLANNEL_MTU"]); err != nil || l.mtu <= 0 {
		return lease{}, fmt.Errorf("subnet.env: FLANNEL_MTU=%q: want a positive integer", vals["FLANNEL_MTU"])
	}
	if l.ipMasq, err = strconv.ParseBool(vals["FLANNEL_IPMASQ"]); err != nil {
		return lease{}, fmt.Errorf("subnet.env: FLANNEL_IPMASQ=%q: %w", vals["FLANNEL_IPMASQ"], err)
	}
	return l, nil
}

// delegateConf is the config the delegate plugin gets: the delegate
// section of the plugin's own config, with flannel's defaults for what it
// leaves out (the bridge plugin, as a gateway; masquerading only when
// flanneld does not; the lease's MTU) and the IPAM always set from the
// lease: host-local over the node's subnet, a route to the whole network.
// It does not change delegate.
func delegateConf(name, cniVersion string, delegate map[string]any, l lease) map[string]any {
	out := map[string]any{}
	for k, v := range delegate {
		out[k] = v
	}
	out["name"] = name
	if cniVersion != "" {
		out["cniVersion"] = cniVersion
	}
	setDefault(out, "type", "bridge")
	if out["type"] == "bridge" {
		setDefault(out, "isGateway", true)
	}
	setDefault(out, "ipMasq", !l.ipMasq)
	setDefault(out, "mtu", l.mtu)
	subnet := net.IPNet{IP: l.subnet.IP.Mask(l.subnet.Mask), Mask: l.subnet.Mask}
	out["ipam"] = map[string]any{
		"type":   "host-local",
		"ranges": [][]map[string]any{{{"subnet": subnet.String()}}},
		"routes": []map[string]any{{"dst": l.network.String()}},
	}
	return out
}

func setDefault(m map[string]any, key string, v any) {
	if _, ok := m[key]; !ok {
		m[key] = v
	}
}
