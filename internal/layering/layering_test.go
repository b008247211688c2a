package layering

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/kube-ipvs-proxy/kube-ipvs-proxy"

// pkg is what `go list -json` says of one package.
type pkg struct {
	ImportPath string
	Dir        string
	Imports    []string // of its non-test files
	Deps       []string // transitively, of its non-test files
	// TestImports and XTestImports are its tests' imports.
	TestImports, XTestImports []string
}

// Groups of import paths the rules name, by prefix.
var (
	clientGo       = []string{"k8s.io/client-go"}
	clientGoClient = []string{"k8s.io/client-go/informers", "k8s.io/client-go/kubernetes", "k8s.io/client-go/metadata", "k8s.io/client-go/rest"}
	// clientsets are client-go's packages that register or serve every
	// API group.
	clientsets = []string{"k8s.io/client-go/kubernetes", "k8s.io/client-go/informers",
		"k8s.io/client-go/metadata/metadatainformer", "k8s.io/client-go/applyconfigurations"}
	kernelLibs = []string{"github.com/vishvananda/netlink", "github.com/vishvananda/netns", "github.com/mdlayher/netlink", "github.com/google/nftables", "github.com/moby/ipvs"}
	klog       = []string{"k8s.io/klog"}
	prometheus = []string{"github.com/prometheus"}
	thisModule = []string{module + "/"}
)

func join(groups ...[]string) []string { return slices.Concat(groups...) }

func own(paths ...string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = module + "/" + p
	}
	return out
}

// rule forbids a package (by import path under the module) to import,
// directly (imports) or at all (deps), any path with one of the
// prefixes; its why is the doc.go that states it.
type rule struct {
	pkg           string
	deps, imports []string
	allowInModule []string // module packages allowed despite thisModule
	why           string
}

var rules = []rule{
	{pkg: "policy", deps: join(clientGo, kernelLibs, klog, prometheus, thisModule),
		why: "policy/doc.go: pure; no client-go, netlink, nftables, ipvs, klog or prometheus"},
	{pkg: "apiconv", deps: join(clientGo, kernelLibs), imports: klog, allowInModule: own("policy"),
		why: "apiconv/doc.go: no I/O, no logging, no client-go, no kernel libraries"},
	{pkg: "manifest", deps: join(clientGo, kernelLibs, own("policy")),
		why: "manifest/doc.go: no client-go, policy or kernel library"},
	{pkg: "metrics", deps: join(clientGoClient, kernelLibs, own("proxier")),
		why: "metrics/doc.go: no proxier, client-go informers or clients, kernel libraries"},
	{pkg: "health", deps: join(clientGoClient, own("proxier")),
		why: "health/doc.go: no proxier, client-go informers or clients"},
	{pkg: "nft", deps: join(clientGo, []string{"github.com/moby/ipvs"}, own("proxier")),
		why: "nft/doc.go: policy and the nftables libraries only; not client-go, moby/ipvs or the IPVS writer"},
	{pkg: "proxier/ipvs", deps: join(clientGo, []string{"github.com/google/nftables"}, own("nft", "proxier/leftovers")),
		why: "proxier/ipvs/doc.go: no client-go or nftables"},
	{pkg: "proxier/ipvs/ipvsnl", deps: join(clientGo, klog, prometheus, thisModule,
		[]string{"github.com/vishvananda/netlink", "github.com/google/nftables", "github.com/moby/ipvs"}),
		allowInModule: own("policy", "internal/nlsock", "internal/nlattr", "internal/nlfamily"),
		why:           "proxier/ipvs/ipvsnl/doc.go: the codec; mdlayher/netlink and the netlink primitives only, no logging"},
	{pkg: "proxier/udpflows", deps: join(clientGo, []string{"github.com/google/nftables", "github.com/moby/ipvs"}, own("nft", "proxier/ipvs")),
		why: "proxier/udpflows/doc.go: no client-go, nftables or the IPVS writer"},
	{pkg: "proxier/leftovers", deps: join(clientGo, own("policy", "nft", "proxier/ipvs")),
		why: "proxier/leftovers/doc.go: kernel libraries only; not policy, client-go or the writers"},
	{pkg: "proxier", imports: kernelLibs,
		why: "proxier/doc.go: no kernel library itself, only through its writer subpackages"},
	{pkg: "cmd/kube-ipvs-proxy", deps: clientsets,
		why: "internal/kubeclient/doc.go: the proxy links no client-go clientset, typed client or informer factory"},
	{pkg: "cmd/kube-ipvs-proxy", deps: []string{"github.com/moby/ipvs", "github.com/sirupsen/logrus"},
		why: "proxier/ipvs/doc.go: IPVS through our own generic netlink sockets; no moby/ipvs (its modprobe exec) or logrus (logs outside klog)"},
	{pkg: "internal/kubeclient", deps: join(thisModule, kernelLibs, clientsets),
		why: "internal/kubeclient/doc.go: client-go's REST client and a scheme of core/v1 and discovery/v1 only"},
	{pkg: "internal/httpserve", deps: join(thisModule, clientGo, prometheus, kernelLibs),
		why: "internal/httpserve/doc.go: net/http only"},
	{pkg: "internal/sysctl", deps: join(thisModule, kernelLibs, clientGo),
		why: "internal/sysctl/doc.go: the standard library only"},
	{pkg: "internal/backoff", deps: join(thisModule, kernelLibs, clientGo),
		why: "internal/backoff/doc.go: the standard library only"},
	{pkg: "internal/nlfamily", deps: kernelLibs,
		why: "internal/nlfamily/doc.go: no netlink library"},
	{pkg: "internal/testsupport/golden", deps: thisModule,
		why: "internal/testsupport/golden/doc.go: os, testing and go-cmp only"},
	{pkg: "internal/testsupport/plantest", deps: thisModule, allowInModule: own("policy"),
		why: "internal/testsupport/plantest/doc.go: package policy only"},
	{pkg: "internal/testsupport/httpservetest", deps: thisModule,
		why: "internal/testsupport/httpservetest/doc.go: net/http and testing only"},
	{pkg: "internal/testsupport/errnos", deps: thisModule,
		why: "internal/testsupport/errnos/doc.go: errors, syscall and golang.org/x/sys/unix only"},
	{pkg: "nft/internal/packettrace", deps: clientGo,
		why: "nft/internal/packettrace/doc.go: no client-go"},
}

// kernelPackages are the packages that may import the kernel libraries
// (STYLE.md: the writers; and the other packages that read or clean the
// kernel: host addresses, kube-proxy's leftovers, the redone dumps).
// Test support and the VM tests may too.
var kernelPackages = own("nft", "proxier/ipvs", "proxier/leftovers", "proxier/hostaddr", "proxier/udpflows", "internal/netlinkdump")

// testSupport are the packages only tests may import: the shared test
// support, and the nftables packet tracer, which sits beside the rules it
// tests.
var testSupport = own("internal/testsupport", "nft/internal/packettrace")

// list runs `go list -json` over the module, with the given build tags.
func list(t *testing.T, tags string) []pkg {
	t.Helper()
	args := []string{"list", "-e", "-json=ImportPath,Dir,Imports,Deps,TestImports,XTestImports"}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	cmd := exec.Command("go", append(args, "./...")...)
	cmd.Dir = filepath.Join("..", "..")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode go list: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	touchModule(t, cmd.Dir)
	return pkgs
}

// touchModule stats every Go file of the module, so that go test's
// cache, which knows only the files the test itself reads, reruns the
// test when one changes, appears or goes (go list reads them in a
// process of its own).
func touchModule(t *testing.T, root string) {
	t.Helper()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(d.Name(), ".go") {
			_, err = os.Stat(path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func hasPrefix(path string, prefixes []string) bool {
	for _, p := range prefixes {
		if path == p || strings.HasPrefix(path, strings.TrimSuffix(p, "/")+"/") {
			return true
		}
	}
	return false
}

// TestImportRules checks the rules of the packages' doc.go files over
// `go list`, with and without the integration build tag.
func TestImportRules(t *testing.T) {
	// The union of both builds' imports.
	byPath := map[string]pkg{}
	for _, tags := range []string{"", "integration"} {
		for _, p := range list(t, tags) {
			q := byPath[p.ImportPath]
			q.ImportPath, q.Dir = p.ImportPath, p.Dir
			q.Imports = append(q.Imports, p.Imports...)
			q.Deps = append(q.Deps, p.Deps...)
			q.TestImports = append(q.TestImports, p.TestImports...)
			q.XTestImports = append(q.XTestImports, p.XTestImports...)
			byPath[p.ImportPath] = q
		}
	}
	for _, r := range rules {
		p, ok := byPath[module+"/"+r.pkg]
		if !ok {
			t.Errorf("rule for %s: no such package", r.pkg)
			continue
		}
		check := func(kind string, paths, forbidden []string) {
			for _, d := range paths {
				if d == p.ImportPath || slices.Contains(r.allowInModule, d) || !hasPrefix(d, forbidden) {
					continue
				}
				t.Errorf("%s %s %s (%s)", r.pkg, kind, d, r.why)
			}
		}
		check("imports", p.Imports, r.imports)
		check("depends on", p.Deps, r.deps)
	}
	for _, p := range byPath {
		rel := strings.TrimPrefix(p.ImportPath, module+"/")
		testOnly := hasPrefix(p.ImportPath, slices.Concat(testSupport, own("integration", "hack")))
		for _, imp := range p.Imports {
			if hasPrefix(imp, kernelLibs) && !testOnly && !hasPrefix(p.ImportPath, kernelPackages) {
				t.Errorf("%s imports the kernel library %s: only %v may (STYLE.md)", rel, imp, kernelPackages)
			}
			if hasPrefix(imp, testSupport) && !testOnly {
				t.Errorf("%s imports the test support %s outside its tests", rel, imp)
			}
		}
	}
	for _, p := range byPath {
		if hasPrefix(p.ImportPath, own("deploy")) {
			for _, d := range slices.Concat(p.Deps, p.TestImports, p.XTestImports) {
				if hasPrefix(d, thisModule) && !hasPrefix(d, own("integration")) {
					t.Errorf("deploy depends on %s (deploy/doc.go: not the command or the proxy's packages)", d)
				}
			}
		}
	}
}

// TestEveryPackageHasADocGo: every package's doc.go says what it owns.
func TestEveryPackageHasADocGo(t *testing.T) {
	for _, tags := range []string{"", "integration"} {
		for _, p := range list(t, tags) {
			b, err := os.ReadFile(filepath.Join(p.Dir, "doc.go"))
			if err != nil {
				t.Errorf("%s: %v", p.ImportPath, err)
				continue
			}
			if !bytes.Contains(b, []byte("// Package ")) && !bytes.Contains(b, []byte("// Command ")) {
				t.Errorf("%s: doc.go has no package comment", p.ImportPath)
			}
		}
	}
}
