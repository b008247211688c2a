//go:build integration

package leftovers

import (
	"encoding/base64"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// legacyRuleset is what kube-proxy v1.36's IPVS mode writes with
// iptables-legacy (its chains, jumps and ipset matches, in its words),
// beside the kubelet's chains and a foreign chain with rules that must
// survive: counters set, a rule without a target (its verdict an offset
// too), a goto to a kube-proxy chain from a foreign one, a foreign jump
// to the kubelet's chain. Per family, iptables-legacy arguments.
var legacyRuleset = map[bool][][]string{
	false: {
		{"-t", "nat", "-N", "KUBE-SERVICES"}, {"-t", "nat", "-N", "KUBE-POSTROUTING"}, {"-t", "nat", "-N", "KUBE-NODE-PORT"},
		{"-t", "nat", "-N", "KUBE-LOAD-BALANCER"}, {"-t", "nat", "-N", "KUBE-MARK-MASQ"}, {"-t", "nat", "-N", "KUBE-PROXY-CANARY"},
		{"-t", "nat", "-N", "KUBE-KUBELET-CANARY"}, {"-t", "nat", "-N", "CNI-FOREIGN"},
		{"-t", "nat", "-A", "PREROUTING", "-m", "comment", "--comment", "kubernetes service portals", "-j", "KUBE-SERVICES"},
		{"-t", "nat", "-A", "PREROUTING", "-c", "7", "700", "-s", "10.244.0.0/16", "-j", "CNI-FOREIGN"},
		{"-t", "nat", "-A", "OUTPUT", "-m", "comment", "--comment", "kubernetes service portals", "-j", "KUBE-SERVICES"},
		{"-t", "nat", "-A", "POSTROUTING", "-c", "6", "600", "-m", "comment", "--comment", "foreign, no target"},
		{"-t", "nat", "-A", "POSTROUTING", "-m", "comment", "--comment", "kubernetes postrouting rules", "-j", "KUBE-POSTROUTING"},
		{"-t", "nat", "-A", "POSTROUTING", "-c", "5", "500", "-j", "CNI-FOREIGN"},
		{"-t", "nat", "-A", "KUBE-SERVICES", "!", "-s", "10.244.0.0/16", "-m", "comment", "--comment", "Kubernetes service cluster ip + port for masquerade purpose", "-m", "set", "--match-set", "KUBE-CLUSTER-IP", "dst,dst", "-j", "KUBE-MARK-MASQ"},
		{"-t", "nat", "-A", "KUBE-SERVICES", "-m", "addrtype", "--dst-type", "LOCAL", "-j", "KUBE-NODE-PORT"},
		{"-t", "nat", "-A", "KUBE-SERVICES", "-m", "set", "--match-set", "KUBE-CLUSTER-IP", "dst,dst", "-j", "ACCEPT"},
		{"-t", "nat", "-A", "KUBE-NODE-PORT", "-p", "tcp", "-m", "set", "--match-set", "KUBE-NODE-PORT-TCP", "dst", "-j", "KUBE-MARK-MASQ"},
		{"-t", "nat", "-A", "KUBE-LOAD-BALANCER", "-j", "KUBE-MARK-MASQ"},
		{"-t", "nat", "-A", "KUBE-MARK-MASQ", "-j", "MARK", "--or-mark", "0x4000"},
		{"-t", "nat", "-A", "KUBE-POSTROUTING", "-m", "set", "--match-set", "KUBE-LOOP-BACK", "dst,dst,src", "-j", "MASQUERADE"},
		{"-t", "nat", "-A", "KUBE-POSTROUTING", "-m", "mark", "!", "--mark", "0x4000/0x4000", "-j", "RETURN"},
		{"-t", "nat", "-A", "KUBE-POSTROUTING", "-j", "MARK", "--xor-mark", "0x4000"},
		{"-t", "nat", "-A", "KUBE-POSTROUTING", "-j", "MASQUERADE", "--random-fully"},
		{"-t", "nat", "-A", "CNI-FOREIGN", "-c", "3", "300", "-d", "10.244.0.0/16", "-j", "ACCEPT"},
		{"-t", "nat", "-A", "CNI-FOREIGN", "-j", "RETURN"},
		{"-t", "filter", "-N", "KUBE-FORWARD"}, {"-t", "filter", "-N", "KUBE-NODE-PORT"}, {"-t", "filter", "-N", "KUBE-PROXY-FIREWALL"},
		{"-t", "filter", "-N", "KUBE-SOURCE-RANGES-FIREWALL"}, {"-t", "filter", "-N", "KUBE-IPVS-FILTER"},
		{"-t", "filter", "-N", "KUBE-IPVS-OUT-FILTER"}, {"-t", "filter", "-N", "KUBE-PROXY-CANARY"},
		{"-t", "filter", "-N", "KUBE-FIREWALL"}, {"-t", "filter", "-N", "KUBE-KUBELET-CANARY"}, {"-t", "filter", "-N", "FOREIGN"},
		{"-t", "filter", "-A", "INPUT", "-c", "8", "800", "-j", "KUBE-FIREWALL"},
		{"-t", "filter", "-A", "INPUT", "-m", "comment", "--comment", "kubernetes ipvs access filter", "-j", "KUBE-IPVS-FILTER"},
		{"-t", "filter", "-A", "INPUT", "-m", "comment", "--comment", "kube-proxy firewall rules", "-j", "KUBE-PROXY-FIREWALL"},
		{"-t", "filter", "-A", "INPUT", "-m", "comment", "--comment", "kubernetes health check rules", "-j", "KUBE-NODE-PORT"},
		{"-t", "filter", "-A", "INPUT", "-c", "9", "900", "-j", "FOREIGN"},
		{"-t", "filter", "-A", "FORWARD", "-m", "comment", "--comment", "kube-proxy firewall rules", "-j", "KUBE-PROXY-FIREWALL"},
		{"-t", "filter", "-A", "FORWARD", "-m", "comment", "--comment", "kubernetes forwarding rules", "-j", "KUBE-FORWARD"},
		{"-t", "filter", "-A", "FORWARD", "-c", "4", "400", "-j", "FOREIGN"},
		{"-t", "filter", "-A", "OUTPUT", "-j", "KUBE-FIREWALL"},
		{"-t", "filter", "-A", "OUTPUT", "-m", "comment", "--comment", "kubernetes ipvs access filter", "-j", "KUBE-IPVS-OUT-FILTER"},
		{"-t", "filter", "-A", "OUTPUT", "-m", "comment", "--comment", "kube-proxy firewall rules", "-j", "KUBE-PROXY-FIREWALL"},
		{"-t", "filter", "-A", "KUBE-FIREWALL", "!", "-s", "127.0.0.0/8", "-d", "127.0.0.0/8", "-m", "comment", "--comment", "block incoming localnet connections", "-j", "DROP"},
		{"-t", "filter", "-A", "KUBE-FORWARD", "-m", "mark", "--mark", "0x4000/0x4000", "-j", "ACCEPT"},
		{"-t", "filter", "-A", "KUBE-FORWARD", "-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "-j", "ACCEPT"},
		{"-t", "filter", "-A", "KUBE-PROXY-FIREWALL", "-j", "KUBE-SOURCE-RANGES-FIREWALL"},
		{"-t", "filter", "-A", "KUBE-SOURCE-RANGES-FIREWALL", "-j", "DROP"},
		{"-t", "filter", "-A", "KUBE-IPVS-FILTER", "-m", "set", "--match-set", "KUBE-LOAD-BALANCER", "dst,dst", "-j", "RETURN"},
		{"-t", "filter", "-A", "KUBE-IPVS-FILTER", "-m", "set", "--match-set", "KUBE-CLUSTER-IP", "dst,dst", "-j", "RETURN"},
		{"-t", "filter", "-A", "KUBE-IPVS-FILTER", "-m", "set", "--match-set", "KUBE-IPVS-IPS", "dst", "-j", "REJECT"},
		{"-t", "filter", "-A", "KUBE-NODE-PORT", "-m", "set", "--match-set", "KUBE-HEALTH-CHECK-NODE-PORT", "dst", "-j", "ACCEPT"},
		{"-t", "filter", "-A", "FOREIGN", "-s", "10.9.9.9/32", "-g", "KUBE-PROXY-FIREWALL"},
		{"-t", "filter", "-A", "FOREIGN", "-c", "2", "200", "-m", "set", "--match-set", "cni-foreign", "src", "-j", "DROP"},
		{"-t", "filter", "-A", "FOREIGN", "-j", "KUBE-FIREWALL"},
		{"-t", "mangle", "-N", "KUBE-PROXY-CANARY"}, {"-t", "mangle", "-N", "KUBE-KUBELET-CANARY"},
	},
	true: {
		{"-t", "nat", "-N", "KUBE-SERVICES"}, {"-t", "nat", "-N", "KUBE-POSTROUTING"}, {"-t", "nat", "-N", "KUBE-MARK-MASQ"},
		{"-t", "nat", "-A", "PREROUTING", "-m", "comment", "--comment", "kubernetes service portals", "-j", "KUBE-SERVICES"},
		{"-t", "nat", "-A", "POSTROUTING", "-m", "comment", "--comment", "kubernetes postrouting rules", "-j", "KUBE-POSTROUTING"},
		{"-t", "nat", "-A", "POSTROUTING", "-c", "1", "100", "-s", "fd00::/8", "-j", "MASQUERADE"},
		{"-t", "nat", "-A", "KUBE-SERVICES", "-m", "set", "--match-set", "KUBE-6-CLUSTER-IP", "dst,dst", "-j", "KUBE-MARK-MASQ"},
		{"-t", "nat", "-A", "KUBE-MARK-MASQ", "-j", "MARK", "--or-mark", "0x4000"},
		{"-t", "nat", "-A", "KUBE-POSTROUTING", "-j", "MASQUERADE"},
		{"-t", "filter", "-N", "KUBE-FORWARD"}, {"-t", "filter", "-N", "KUBE-FIREWALL"},
		{"-t", "filter", "-A", "FORWARD", "-m", "comment", "--comment", "kubernetes forwarding rules", "-j", "KUBE-FORWARD"},
		{"-t", "filter", "-A", "FORWARD", "-c", "3", "300", "-s", "fd00::/8", "-j", "ACCEPT"},
		{"-t", "filter", "-A", "KUBE-FORWARD", "-m", "mark", "--mark", "0x4000/0x4000", "-j", "ACCEPT"},
	},
}

// legacyIPSets are the ipsets legacyRuleset matches.
var legacyIPSets = [][]string{
	{"KUBE-CLUSTER-IP", "hash:ip,port"}, {"KUBE-LOOP-BACK", "hash:ip,port,ip"}, {"KUBE-NODE-PORT-TCP", "bitmap:port", "range", "0-65535"},
	{"KUBE-LOAD-BALANCER", "hash:ip,port"}, {"KUBE-IPVS-IPS", "hash:ip"}, {"KUBE-HEALTH-CHECK-NODE-PORT", "bitmap:port", "range", "0-65535"},
	{"KUBE-6-CLUSTER-IP", "hash:ip,port", "family", "inet6"}, {"cni-foreign", "hash:ip"},
}

// xtRun runs iptables-legacy (ip6tables-legacy, -save, -restore) through
// Debian's multi-call binary.
func xtRun(t *testing.T, name string, stdin string, args ...string) string {
	t.Helper()
	path, err := exec.LookPath("xtables-legacy-multi")
	if err != nil {
		t.Fatalf("xtables-legacy-multi is not staged into the VM (make integration stages it): %v", err)
	}
	cmd := exec.Command(path, args...)
	cmd.Args[0] = name
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func ipsetRun(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ipset", args...).CombinedOutput(); err != nil {
		t.Fatalf("ipset %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// withoutKubeProxy is an iptables-legacy-save text with kube-proxy's
// chains of the table, their rules and every rule jumping or going to
// them left out: what removing them by hand leaves.
func withoutKubeProxy(save, table string) string {
	doomed := kubeProxyChains[table]
	var out []string
	for _, line := range strings.Split(save, "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && strings.HasPrefix(f[0], "[") { // -c's counters
			f = f[1:]
		}
		drop := len(f) > 0 && strings.HasPrefix(f[0], ":") && contains(doomed, f[0][1:])
		drop = drop || len(f) > 1 && f[0] == "-A" && contains(doomed, f[1])
		for i := 0; i+1 < len(f); i++ {
			drop = drop || (f[i] == "-j" || f[i] == "-g") && contains(doomed, f[i+1])
		}
		if !drop {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestCaptureXtBlobs prints, for testdata/, each table of legacyRuleset
// as the kernel hands it out (ipt_getinfo, then the entries) before and
// after kube-proxy's chains are removed by iptables-legacy itself (its
// save, less those chains, restored): what spliceXtTable must turn the
// first into. Only with KIP_XT_CAPTURE=1, in the VM lab; the console
// lines XTCAPTURE <file> <base64> are joined by hand into the files.
func TestCaptureXtBlobs(t *testing.T) {
	if os.Getenv("KIP_VMLAB") != "1" || os.Getenv("KIP_XT_CAPTURE") != "1" {
		t.Skip("only in the VM lab with KIP_XT_CAPTURE=1")
	}
	t.Cleanup(func() {
		for _, ipt := range []string{"iptables-legacy", "ip6tables-legacy"} {
			for _, table := range []string{"filter", "nat", "mangle"} {
				xtRun(t, ipt, "", "-t", table, "-F")
				xtRun(t, ipt, "", "-t", table, "-X")
			}
		}
		for _, s := range legacyIPSets {
			ipsetRun(t, "destroy", s[0])
		}
	})
	for _, s := range legacyIPSets {
		ipsetRun(t, append([]string{"-exist", "create"}, s...)...)
	}
	for _, fam := range []struct {
		v6         bool
		name, ipt  string
		save, rest string
	}{
		{false, "ip", "iptables-legacy", "iptables-legacy-save", "iptables-legacy-restore"},
		{true, "ip6", "ip6tables-legacy", "ip6tables-legacy-save", "ip6tables-legacy-restore"},
	} {
		for _, args := range legacyRuleset[fam.v6] {
			xtRun(t, fam.ipt, "", args...)
		}
		for _, table := range []string{"filter", "nat", "mangle"} {
			if fam.v6 && table == "mangle" {
				continue
			}
			capture(t, fam.v6, table, fam.name+"-"+table+"-before")
			save := xtRun(t, fam.save, "", "-c", "-t", table)
			xtRun(t, fam.rest, withoutKubeProxy(save, table), "-c")
			capture(t, fam.v6, table, fam.name+"-"+table+"-after")
			t.Logf("%s %s after:\n%s", fam.name, table, xtRun(t, fam.save, "", "-c", "-t", table))
		}
	}
}

// capture prints a table's ipt_getinfo and entries, base64 in lines of
// 76 characters.
func capture(t *testing.T, v6 bool, table, file string) {
	blob, info, err := readXtTable(v6, table)
	if err != nil {
		t.Fatalf("read %s: %v", file, err)
	}
	b := base64.StdEncoding.EncodeToString(append(info, blob...))
	for i := 0; i < len(b); i += 76 {
		os.Stdout.WriteString("XTCAPTURE " + file + " " + b[i:min(i+76, len(b))] + "\n")
	}
}
