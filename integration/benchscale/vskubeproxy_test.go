//go:build integration

package benchscale

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	mobyipvs "github.com/moby/ipvs"
	"github.com/vishvananda/netlink"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/benchscale/results"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/vme2e"
)

// TestVsKubeProxyInVM is make bench-vs-kube-proxy's VM half: upstream
// kube-proxy (--proxy-mode=ipvs through its config file) and ours, one
// after the other in this boot against the workload the host loaded,
// Rounds times (kube-proxy first in odd rounds, ours first in even ones,
// so that a drift of the host's load hits both alike). Each starts on a
// clean kernel and is observed alike, from the kernel: when IPVS holds
// every virtual server and destination of the workload, and how long an
// endpoint change takes to get there; and from /proc: its CPU time and
// memory. Its own first sync is its own account of it: both export
// kube-proxy's kubeproxy_sync_proxy_rules_* metrics.
func TestVsKubeProxyInVM(t *testing.T) {
	adminKC := os.Getenv(vme2e.EnvAdminKubeconfig)
	if adminKC == "" || os.Getenv(envVMVsKubeProxy) == "" {
		t.Skip("run by the host half: make bench-vs-kube-proxy")
	}
	w, phases, list := vmHalf(t)
	bins := map[string]string{}
	for _, b := range list {
		bins[b.label] = b.path
	}
	if bins[results.KubeProxy] == "" || bins[results.Ours] == "" {
		t.Fatalf("%s: want %s= and %s=", envVMProxies, results.KubeProxy, results.Ours)
	}
	installIptables(t)
	if err := vme2e.BringUpNetwork(); err != nil {
		t.Fatal(err)
	}
	admin := loadedAdmin(t, adminKC, w)
	config := vsConfig(t, "")
	// kube-proxy also watches ServiceCIDRs, which our ServiceAccount may
	// not list: it gets the admin's credentials, so that it does not
	// retry a forbidden watch throughout.
	kpConfig := vsConfig(t, adminKC)
	b := &bench{admin: admin, w: w, want: w.Expected(), phases: phases, gens: map[int]int{}}
	t.Logf("%d services, %d endpoints; IPVS must hold %d virtual servers and %d destinations",
		w.Services, w.Services*PerService, b.want.VirtualServers, b.want.Destinations)
	for round := range phases.Rounds {
		for _, label := range RoundOrder([]string{results.KubeProxy, results.Ours}, round) {
			t.Run(fmt.Sprintf("%s#%d", label, round+1), func(t *testing.T) {
				c := config
				if label == results.KubeProxy {
					c = kpConfig
				}
				run := b.versus(t, proxyBin{label, bins[label]}, bins[results.Ours], c, round)
				fmt.Println(resultLine(run))
			})
		}
	}
}

// installIptables links the staged xtables-nft-multi (make
// bench-vs-kube-proxy puts it in the VM with ipset) under the names
// kube-proxy runs, and gives ipset the /etc/protocols it reads. IPv4 only: without ip6tables kube-proxy runs one
// proxier, not two, which spares it work.
func installIptables(t *testing.T) {
	t.Helper()
	multi, err := exec.LookPath("xtables-nft-multi")
	if err != nil {
		t.Fatalf("iptables is not staged into the VM (make bench-vs-kube-proxy stages it): %v", err)
	}
	if _, err := exec.LookPath("ipset"); err != nil {
		t.Fatalf("ipset is not staged into the VM: %v", err)
	}
	for _, name := range []string{"iptables", "iptables-save", "iptables-restore"} {
		if err := os.Symlink(multi, "/bin/"+name); err != nil && !os.IsExist(err) {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll("/run", 0o755); err != nil { // iptables' lock file
		t.Fatal(err)
	}
	// ipset names protocols ("10.96.0.1,tcp:80") through /etc/protocols,
	// which the lab's initramfs lacks: without it every entry kube-proxy
	// adds fails, and each of its syncs retries them all, one ipset
	// process each.
	if _, err := os.Stat("/etc/protocols"); err != nil {
		protocols := "ip\t0\tIP\nicmp\t1\tICMP\ntcp\t6\tTCP\nudp\t17\tUDP\nsctp\t132\tSCTP\n"
		if err := os.MkdirAll("/etc", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile("/etc/protocols", []byte(protocols), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// vsConfig is deploy/base's config file with the NodePort addresses
// named: kube-proxy's default also puts NodePorts on the guest's other
// addresses, ours on its node IP only, and both must program the same
// table. A kubeconfig, if given, replaces the ServiceAccount's.
func vsConfig(t *testing.T, kubeconfig string) string {
	t.Helper()
	b, err := os.ReadFile(ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "nodePortAddresses:") {
		t.Fatalf("%s already sets nodePortAddresses", ConfigPath)
	}
	path := "/tmp/vs-ours.conf"
	if kubeconfig != "" {
		b = []byte(strings.ReplaceAll(string(b), KubeconfigPath, kubeconfig))
		path = "/tmp/vs-kube-proxy.conf"
	}
	if err := os.WriteFile(path, intoFirstDocument(b, "nodePortAddresses: ["+GuestAddr+"/32]"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// versus measures one proxy from a cold start and leaves the kernel clean.
func (b *bench) versus(t *testing.T, bin proxyBin, ours, config string, round int) Run {
	run := Run{Proxy: bin.label, Round: round, Services: b.w.Services, Endpoints: b.w.Services * PerService}
	b.startClean(t, bin, &run)
	logPath := fmt.Sprintf("/tmp/%s-%d.log", bin.label, time.Now().UnixNano())
	start := time.Now()
	b.p = startWith(t, logPath, bin.path, "--config="+config, "--hostname-override="+NodeName)
	limit := 5*time.Minute + time.Duration(b.w.Services)*100*time.Millisecond
	capped := b.phases.TableWait > 0
	if capped {
		limit = time.Duration(b.phases.TableWait) * time.Second
	}
	complete, reads, last, done := b.waitTable(start, limit, capped)
	cpu := b.p.cpu(t)
	if !done {
		// The wait and what was read by then are lower bounds; the
		// first sync and the endpoint changes would wait for the table.
		t.Logf("%s: IPVS table not complete %v after start (KIP_BENCH_SCALE_TABLE_WAIT; %d readings, the last took %v), %v CPU; nothing after it measured",
			bin.label, complete.Round(time.Millisecond), reads, last.Round(time.Millisecond), cpu)
		run.Add(results.TableNotYet, complete.Seconds(), "s")
		run.Add(results.CPUNotYet, cpu.Seconds(), "s")
		if _, hwm := b.p.memory(t); hwm > 0 {
			run.Add(results.PeakRSSNotYet, hwm, "MiB")
		}
		// Where it was: a proxy that never began its table says why only
		// in its log.
		t.Logf("%s: its log's last lines:\n%s", bin.label, tail(b.p.logPath, 20))
		b.p.kill()
		<-b.p.done
		b.clean(ours, config)
		return run
	}
	t.Logf("%s: IPVS table complete %v after start (%d readings; the last, which found it, took %v), %v CPU", bin.label,
		complete.Round(time.Millisecond), reads, last.Round(time.Millisecond), cpu)
	run.Add(results.TableComplete, complete.Seconds(), "s")
	run.Add(results.CPUUntilTable, cpu.Seconds(), "s")

	syncLimit := 10*time.Minute + time.Duration(b.w.Services)*400*time.Millisecond
	if w := time.Duration(b.phases.FirstSyncWait) * time.Second; w > 0 {
		syncLimit = complete + w
	}
	first, exact, done := b.firstSync(start, syncLimit, b.phases.FirstSyncWait > 0)
	if !done {
		// Its first sync still runs: the endpoint changes would wait
		// for it. The wait is a lower bound of the first sync.
		cpu = b.p.cpu(t)
		t.Logf("%s: own first sync not done %v after start (KIP_BENCH_SCALE_FIRST_SYNC_WAIT), %v CPU; no endpoint change measured", bin.label, first.Round(time.Millisecond), cpu)
		run.Add(results.OwnFirstSyncNotYet, first.Seconds(), "s")
		run.Add("CPU by then", cpu.Seconds(), "s")
		if rss, hwm := b.p.memory(t); rss > 0 {
			run.Add("memory: RSS by then", rss, "MiB")
			run.Add(results.PeakRSS, hwm, "MiB")
		}
		b.p.kill()
		<-b.p.done
		b.clean(ours, config)
		return run
	}
	if !exact {
		t.Logf("%s: more than one sync by the first reading of /metrics after the table was complete: the first sync's time is an upper bound", bin.label)
	}
	cpu = b.p.cpu(t)
	t.Logf("%s: own first sync done %v after start, %v CPU", bin.label, first.Round(time.Millisecond), cpu)
	if bin.label == results.Ours {
		// Where its cold start went, from its log.
		b.startupTimeline("ours", start)
		b.firstSyncParts(&run, "cold start", start)
	}
	run.Add(results.OwnFirstSync, first.Seconds(), "s")
	run.Add("CPU by the first sync (read within 1 s after it)", cpu.Seconds(), "s")
	if got, err := b.k.count(); err != nil || got.VirtualServers != b.want.VirtualServers || got.Destinations != b.want.Destinations {
		b.p.fatal(t, "after its first sync the kernel holds %+v (err %v), want %+v", got, err, b.want)
	} else {
		t.Logf("%s: the kernel holds %+v", bin.label, got)
	}
	b.settleRSS()
	b.changesToKernel()
	if m, err := scrape(); err == nil && m.sum(mSyncCount) > 0 {
		// Its own account of its syncs, which the changes waited for.
		n := m.sum(mSyncCount)
		t.Logf("%s: %.0f syncs so far, %.1f s in all", bin.label, n, m.sum(mSyncSum))
		run.Add("own syncs so far", n, "")
		run.Add("own mean sync duration", m.sum(mSyncSum)/n, "s")
	}
	t.Logf("%s: its log's last lines:\n%s", bin.label, tail(b.p.logPath, 8))
	b.p.kill()
	<-b.p.done
	if bin.label == results.Ours {
		// The floors, beside this boot's cold start: the table it
		// programmed, programmed again into a fresh namespace one request
		// at a time and batched.
		tb := b.k.snapshot(t)
		b.floor(tb, complete)
		b.batchedFloor(tb, complete)
	}
	b.clean(ours, config)
	return run
}

// firstSync waits until the proxy's /metrics count a sync (both proxies
// export kube-proxy's kubeproxy_sync_proxy_rules_* metrics) and returns
// when the first ended, from start: the last sync's timestamp, exact
// while only one sync is counted. /metrics is read only once the table
// is complete, once a second, so that its scrapes cost neither proxy
// anything before then.
// With capped, reaching limit is no failure: it returns the time waited
// and done false.
func (b *bench) firstSync(start time.Time, limit time.Duration, capped bool) (took time.Duration, exact, done bool) {
	for {
		if b.p.exited() {
			b.p.fatal(b.t, "the proxy exited before its first sync")
		}
		m, err := scrape()
		if n := m.sum(mSyncCount); err == nil && n >= 1 {
			if n == 1 && m.has(mLastSync) {
				at := m.sum(mLastSync)
				return time.Unix(0, int64(at*1e9)).Sub(start), true, true
			}
			return time.Since(start), false, true
		}
		if time.Since(start) > limit {
			if capped {
				return time.Since(start), false, false
			}
			b.p.fatal(b.t, "no first sync within %v (scrape error %v)", limit, err)
		}
		time.Sleep(time.Second)
	}
}

// waitTable reads IPVS (tableCheck) until it holds the workload's
// virtual servers and destinations, and returns when a reading first
// found them all, at that reading's end. The same readings for either
// proxy, spaced by twice what the last one took (tableCheck.spacing; at
// least 100 ms) so as to leave the vCPUs to the proxy. Past limit the
// run fails, unless capped: then it returns the time waited and done
// false.
func (b *bench) waitTable(start time.Time, limit time.Duration, capped bool) (took time.Duration, reads int, last time.Duration, done bool) {
	tc, err := newTableCheck(b.k, b.want.VirtualServers, PerService)
	if err != nil {
		b.p.fatal(b.t, "table check: %v", err)
	}
	defer tc.Close()
	for {
		if b.p.exited() {
			b.p.fatal(b.t, "the proxy exited before the table was complete")
		}
		t0 := time.Now()
		vs, dests, err := tc.read()
		reads++
		last = time.Since(t0)
		complete := err == nil && vs == b.want.VirtualServers && dests == b.want.Destinations
		if tc.asks() && (complete || time.Since(start) > limit) {
			b.t.Logf("%s: table check: %d dumps of destinations in all; the last reading's dump of the virtual servers took %v, then %d dumps of destinations",
				b.bin.label, tc.askedAll, tc.dumpTook.Round(time.Millisecond), tc.asked)
		}
		if complete {
			return time.Since(start), reads, last, true
		}
		if time.Since(start) > limit {
			if capped {
				b.t.Logf("%s: by then IPVS holds %d of %d virtual servers and %d of %d destinations (err %v; destinations are counted once every virtual server is there)",
					b.bin.label, vs, b.want.VirtualServers, dests, b.want.Destinations, err)
				return time.Since(start), reads, last, false
			}
			b.p.fatal(b.t, "the table is not complete after %v: %d virtual servers, %d destinations (err %v), want %+v",
				limit, vs, dests, err, b.want)
		}
		time.Sleep(max(100*time.Millisecond, 2*tc.spacing(last)))
	}
}

// procIPVS counts the virtual servers and destinations /proc/net/ip_vs
// lists: one line each, the destinations' starting with "  ->".
func procIPVS() (vs, dests int, err error) {
	data, err := os.ReadFile("/proc/net/ip_vs")
	if err != nil {
		return 0, 0, err
	}
	for _, l := range strings.Split(string(data), "\n") {
		switch {
		case strings.HasPrefix(l, "  -> RemoteAddress"):
		case strings.HasPrefix(l, "  ->"):
			dests++
		case strings.HasPrefix(l, "TCP "), strings.HasPrefix(l, "UDP "), strings.HasPrefix(l, "SCTP "), strings.HasPrefix(l, "FWM "):
			vs++
		}
	}
	return vs, dests, nil
}

// settleRSS reads RSS once a second for 15 s after the first sync; the
// last reading is the memory when quiet.
func (b *bench) settleRSS() {
	var series []string
	var rss, hwm float64
	for range 15 {
		time.Sleep(time.Second)
		rss, hwm = b.p.memory(b.t)
		series = append(series, fmt.Sprintf("%.0f", rss))
	}
	b.t.Logf("%s: RSS once a second after the first sync (MiB): %s", b.bin.label, strings.Join(series, " "))
	b.run.Add(results.SettledRSS, rss, "MiB")
	b.run.Add(results.PeakRSS, hwm, "MiB")
}

// vsChangeLimit bounds the wait for one endpoint change: kube-proxy took
// minutes for one at 1,000 services under TCG on a busy host.
const vsChangeLimit = 30 * time.Minute

// changesToKernel: Changes EndpointSlice updates, one at a time, each
// waited for in IPVS: the latency from the write to the kernel.
func (b *bench) changesToKernel() {
	n := min(b.phases.Changes, b.w.Services)
	if n == 0 {
		return
	}
	cpu0 := b.p.cpu(b.t)
	var lat []float64
	for k := range n {
		i, l, _ := b.changeEndpoint(k, vsChangeLimit)
		lat = append(lat, ms(l))
		b.t.Logf("%s: endpoint change %d (service %d): in IPVS after %v", b.bin.label, k+1, i, l.Round(time.Millisecond))
	}
	cpu := b.p.cpu(b.t) - cpu0
	b.t.Logf("%s: %d endpoint changes: p50 %.1f ms, max %.1f ms, %v CPU", b.bin.label, n, Percentile(lat, 50), Percentile(lat, 100), cpu)
	b.run.Add(results.ChangeP50, Percentile(lat, 50), "ms")
	b.run.Add("endpoint change → kernel: max", Percentile(lat, 100), "ms")
	b.run.Add("endpoint change: CPU per change", ms(cpu)/float64(n), "ms")
}

// clean leaves the kernel, once the proxy has stopped, as the next run needs it:
// no virtual server, no kube-ipvs0, none of kube-proxy's iptables rules
// and ipsets, none of our nftables table. kube-proxy cleans up after
// itself with its --cleanup, ours with its own; IPVS is then checked
// empty, and what is left of iptables and ipsets is logged.
func (b *bench) clean(ours, config string) {
	t := b.t
	if b.bin.label == results.KubeProxy {
		// kube-proxy v1.36's --cleanup removes IPVS and kube-ipvs0 first,
		// then fails on its own chains that still jump to each other
		// ("CHAIN_DEL failed (Device or resource busy)"); a second pass
		// finds fewer. What stays in iptables does not touch IPVS, and
		// ours removes kube-proxy's leftovers after its first sync.
		for pass := 1; pass <= 2; pass++ {
			out, err := exec.Command(b.bin.path, "--cleanup", "--config="+config).CombinedOutput()
			if err == nil {
				break
			}
			t.Logf("kube-proxy --cleanup (pass %d): %v\n%s", pass, err, tailString(string(out), 6))
		}
	} else if out, err := exec.Command(ours, "--cleanup").CombinedOutput(); err != nil {
		t.Fatalf("ours --cleanup: %v\n%s", err, tailString(string(out), 20))
	} else {
		t.Logf("ours --cleanup:\n%s", tailString(string(out), 6))
	}
	h, err := mobyipvs.New("")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if got, err := b.k.count(); err != nil || got != (Expected{}) {
		var some []string
		if vss, err := h.GetServices(); err == nil {
			for _, vs := range vss[:min(len(vss), 8)] {
				some = append(some, fmt.Sprintf("%s:%d/%d", vs.Address, vs.Port, vs.Protocol))
			}
		}
		t.Logf("after %s --cleanup the kernel holds %+v (err %v), among them %s; flushing IPVS", b.bin.label, got, err, strings.Join(some, " "))
		if err := h.Flush(); err != nil {
			t.Fatal(err)
		}
		if link, err := netlink.LinkByName("kube-ipvs0"); err == nil {
			_ = netlink.LinkDel(link)
		}
	}
	if got, err := b.k.count(); err != nil || got != (Expected{}) {
		t.Fatalf("the kernel holds %+v (err %v) after the cleanup", got, err)
	}
	sets, _ := exec.Command("ipset", "list", "-n").CombinedOutput()
	rules, _ := exec.Command("iptables-save").CombinedOutput()
	t.Logf("after %s's cleanup: ipsets %q; iptables-save: %d lines with KUBE-", b.bin.label,
		strings.Fields(string(sets)), strings.Count(string(rules), "KUBE-"))
}

func tailString(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
