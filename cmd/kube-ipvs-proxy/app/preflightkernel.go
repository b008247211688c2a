package app

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// The preflight's kernel checks read the host's files through an fs.FS
// rooted at / (tests give a fstest.MapFS): sysfs for the loaded modules,
// procfs for the release, /lib/modules for the modules that could load.

// onNode reports whether root looks like a Linux host's: procfs and sysfs.
func onNode(root fs.FS) bool {
	_, errProc := fs.Stat(root, "proc/sys/kernel/osrelease")
	_, errSys := fs.Stat(root, "sys/module")
	return errProc == nil && errSys == nil
}

// isHost reports whether this host goes by one of names: its hostname
// (procfs) equals one, or the first label of one, ignoring case, as the
// kubelet's default node name is the lowercased hostname and clouds'
// names are often its FQDN.
func isHost(root fs.FS, names []string) bool {
	b, err := fs.ReadFile(root, "proc/sys/kernel/hostname")
	if err != nil {
		return false
	}
	host := strings.TrimSpace(string(b))
	if host == "" {
		return false
	}
	hostLabel, _, _ := strings.Cut(host, ".")
	for _, n := range names {
		label, _, _ := strings.Cut(n, ".")
		if strings.EqualFold(n, host) || strings.EqualFold(label, host) || strings.EqualFold(n, hostLabel) {
			return true
		}
	}
	return false
}

// moduleState is what the host says of one kernel module.
type moduleState int

const (
	moduleUnknown   moduleState = iota // /lib/modules is not readable here
	moduleMissing                      // neither loaded nor installed
	moduleAvailable                    // installed or built in, not loaded
	moduleLoaded
)

// kernelFindings checks what the proxy needs of the kernel: ip_vs loaded
// (the proxy loads no module and stops without it), the scheduler's
// module (the kernel loads it for the first virtual server that names
// it, as for kube-proxy's probe), nf_tables and nf_conntrack (loaded on
// first use when installed).
func kernelFindings(root fs.FS, scheduler string) []finding {
	var out []finding
	add := func(sev severity, msg string) { out = append(out, finding{sev, groupNode, "kernel", msg}) }
	release := ""
	if b, err := fs.ReadFile(root, "proc/sys/kernel/osrelease"); err == nil {
		release = strings.TrimSpace(string(b))
	}
	add(sevInfo, "release "+release)
	mods := readModuleIndex(root, release)
	state := func(name string) moduleState { return mods.state(root, name) }

	switch state("ip_vs") {
	case moduleLoaded:
		add(sevInfo, "ip_vs loaded")
	default:
		add(sevError, "ip_vs is not loaded: the proxy loads no module and stops at start; load it at boot (/etc/modules-load.d/ipvs.conf)")
	}
	if scheduler == "" {
		scheduler = policy.DefaultScheduler
	}
	if scheduler != "none" {
		mod := "ip_vs_" + scheduler
		switch state(mod) {
		case moduleLoaded:
			add(sevInfo, fmt.Sprintf("scheduler %s: %s loaded", scheduler, mod))
		case moduleAvailable:
			add(sevInfo, fmt.Sprintf("scheduler %s: %s installed, loaded by the kernel at the first virtual server", scheduler, mod))
		case moduleMissing:
			add(sevError, fmt.Sprintf("scheduler %s: no module %s in /lib/modules/%s: the proxy stops at start", scheduler, mod, release))
		default:
			add(sevWarning, fmt.Sprintf("scheduler %s: %s not loaded, and /lib/modules/%s is not readable here to tell whether it can be", scheduler, mod, release))
		}
	}
	for _, mod := range []string{"nf_tables", "nf_conntrack"} {
		switch state(mod) {
		case moduleLoaded:
			add(sevInfo, mod+" loaded")
		case moduleAvailable:
			add(sevInfo, mod+" installed, loaded by the kernel on first use")
		case moduleMissing:
			add(sevError, fmt.Sprintf("no module %s in /lib/modules/%s: the proxy cannot program nftables", mod, release))
		default:
			add(sevWarning, fmt.Sprintf("%s not loaded, and /lib/modules/%s is not readable here to tell whether it can be", mod, release))
		}
	}
	return out
}

// moduleIndex is the set of modules /lib/modules/RELEASE says the
// kernel can load (modules.dep) or has built in (modules.builtin); nil
// when neither file is readable.
type moduleIndex map[string]bool

func readModuleIndex(root fs.FS, release string) moduleIndex {
	if release == "" {
		return nil
	}
	var idx moduleIndex
	for _, f := range []string{"modules.dep", "modules.builtin"} {
		data, err := fs.ReadFile(root, path.Join("lib/modules", release, f))
		if err != nil {
			continue
		}
		if idx == nil {
			idx = moduleIndex{}
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
		for sc.Scan() {
			file, _, _ := strings.Cut(sc.Text(), ":")
			idx[moduleName(file)] = true
		}
	}
	return idx
}

// moduleName is a module's name from its path in modules.dep:
// kernel/net/netfilter/ipvs/ip_vs_rr.ko.xz is ip_vs_rr; the kernel
// treats - and _ alike.
func moduleName(file string) string {
	name := path.Base(file)
	if i := strings.Index(name, ".ko"); i >= 0 {
		name = name[:i]
	}
	return strings.ReplaceAll(name, "-", "_")
}

func (idx moduleIndex) state(root fs.FS, name string) moduleState {
	// sysfs lists loaded modules, and built-in ones that have parameters.
	if _, err := fs.Stat(root, "sys/module/"+name); err == nil {
		return moduleLoaded
	}
	switch {
	case idx == nil:
		return moduleUnknown
	case idx[name]:
		return moduleAvailable
	default:
		return moduleMissing
	}
}
