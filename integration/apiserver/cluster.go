package apiserver

import (
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Defaults for Options.
const (
	DefaultServiceCIDR  = "10.96.0.0/16"
	DefaultIssuer       = "https://kubernetes.default.svc.cluster.local"
	DefaultReadyTimeout = 3 * time.Minute
	// AdminUser is the admin's user name; its client cert is in the
	// system:masters group (cluster-admin, bypasses RBAC).
	AdminUser = "admin"
)

// Options configure Start. The zero value is a working cluster.
type Options struct {
	// BinDir holds kube-apiserver and etcd; default $KIP_K8S_BIN_DIR,
	// then <repo>/.cache/k8s/bin.
	BinDir string
	// AdvertiseAddress is --advertise-address; default 127.0.0.1. With a
	// loopback address the harness sets --endpoint-reconciler-type=none,
	// because the apiserver cannot publish a loopback endpoint for the
	// kubernetes Service (see README.md). A non-loopback address (it is
	// only written into the kubernetes Service's endpoints, never dialed)
	// keeps the default lease reconciler, so the kubernetes Service gets
	// an EndpointSlice like in a real cluster.
	AdvertiseAddress string
	// ServiceCIDR is --service-cluster-ip-range; default 10.96.0.0/16.
	ServiceCIDR string
	// ExtraArgs are appended to kube-apiserver's flags (a later flag wins).
	ExtraArgs []string
	// ReadyTimeout bounds each wait for /readyz; default 3m.
	ReadyTimeout time.Duration
	// EtcdSeed, if set, is a data dir saved by SaveEtcd: etcd starts
	// from a copy of it, with every object it held (see etcdseed.go).
	EtcdSeed string
	// ExtraServingIPs are added to the serving cert's IP SANs, for clients
	// that reach the loopback listener under another address (e.g. a qemu
	// guest dialing 10.0.2.2, which user networking forwards to the
	// host's 127.0.0.1). The apiserver still listens on 127.0.0.1 only.
	ExtraServingIPs []net.IP
}

// Cluster is a running etcd + kube-apiserver pair. Its methods are safe
// for concurrent use.
type Cluster struct {
	t        testing.TB
	opts     Options
	dir      string
	binDir   string
	pki      *pki
	admin    certPair
	url      string
	etcdURL  string
	apiArgs  []string
	etcdArgs []string
	etcd     *proc

	mu  sync.Mutex
	api *proc // nil while stopped
}

// Start runs etcd and kube-apiserver on free loopback ports and waits for
// /readyz and the default/kubernetes Service. Cleanup stops both and removes their
// files. It skips t when the binaries are not built (see binaries).
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	binDir := binaries(t, opts.BinDir)
	if opts.AdvertiseAddress == "" {
		opts.AdvertiseAddress = "127.0.0.1"
	}
	if opts.ServiceCIDR == "" {
		opts.ServiceCIDR = DefaultServiceCIDR
	}
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = DefaultReadyTimeout
	}
	c, err := newCluster(t, opts, binDir, t.TempDir())
	if err != nil {
		t.Fatalf("apiserver: %v", err)
	}
	t.Cleanup(c.cleanup)
	if err := c.seedEtcd(); err != nil {
		t.Fatalf("apiserver: %v", err)
	}
	if err := c.startEtcd(); err != nil {
		t.Fatalf("apiserver: %v", err)
	}
	if err := c.startAPIServer(); err != nil {
		t.Fatalf("apiserver: %v", err)
	}
	return c
}

func newCluster(t testing.TB, opts Options, binDir, dir string) (*Cluster, error) {
	advertise := net.ParseIP(opts.AdvertiseAddress)
	if advertise == nil {
		return nil, fmt.Errorf("advertise address %q is not an IP", opts.AdvertiseAddress)
	}
	serviceIP, err := firstServiceIP(opts.ServiceCIDR)
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	p, err := newPKI(dir, serviceIP, advertise, opts.ExtraServingIPs...)
	if err != nil {
		return nil, err
	}
	admin, err := p.clientCert(AdminUser, []string{"system:masters"})
	if err != nil {
		return nil, err
	}
	c := &Cluster{
		t: t, opts: opts, dir: dir, binDir: binDir, pki: p, admin: admin,
		etcdURL: "http://127.0.0.1:" + strconv.Itoa(ports[0]),
		url:     "https://127.0.0.1:" + strconv.Itoa(ports[2]),
	}
	c.apiArgs = c.apiserverArgs(ports[2])
	c.etcdArgs = []string{
		"--data-dir=" + filepath.Join(dir, "etcd"),
		"--listen-client-url=" + c.etcdURL,
		"--listen-peer-url=http://127.0.0.1:" + strconv.Itoa(ports[1]),
		"--unsafe-no-fsync",
	}
	return c, nil
}

// firstServiceIP is the kubernetes Service's ClusterIP: the CIDR's first
// host address.
func firstServiceIP(cidr string) (net.IP, error) {
	_, n, err := net.ParseCIDR(cidr)
	if err != nil {
		return nil, fmt.Errorf("service CIDR: %w", err)
	}
	ip := make(net.IP, len(n.IP))
	copy(ip, n.IP)
	ip[len(ip)-1]++
	return ip, nil
}

// apiserverArgs are kube-apiserver's flags; README.md explains each.
func (c *Cluster) apiserverArgs(port int) []string {
	args := []string{
		"--etcd-servers=" + c.etcdURL,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--advertise-address=" + c.opts.AdvertiseAddress,
		"--cert-dir=" + filepath.Join(c.dir, "apiserver-certs"),
		"--tls-cert-file=" + c.pki.certFile,
		"--tls-private-key-file=" + c.pki.keyFile,
		"--client-ca-file=" + c.pki.caFile,
		"--service-cluster-ip-range=" + c.opts.ServiceCIDR,
		"--service-account-issuer=" + DefaultIssuer,
		"--service-account-key-file=" + c.pki.saPub,
		"--service-account-signing-key-file=" + c.pki.saKey,
		"--authorization-mode=Node,RBAC",
		"--profiling=false",
	}
	if ip := net.ParseIP(c.opts.AdvertiseAddress); ip.IsLoopback() {
		args = append(args, "--endpoint-reconciler-type=none")
	}
	return append(args, c.opts.ExtraArgs...)
}
