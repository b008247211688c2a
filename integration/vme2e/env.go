package vme2e

// The contract between the host half and the VM half: where the
// kubeconfigs land in the VM, and the environment naming them.
const (
	// EnvProxyKubeconfig names the proxy's ServiceAccount kubeconfig.
	EnvProxyKubeconfig = "KIP_VME2E_PROXY_KUBECONFIG"
	// EnvAdminKubeconfig names the admin kubeconfig the VM test creates
	// objects with.
	EnvAdminKubeconfig = "KIP_VME2E_ADMIN_KUBECONFIG"

	vmProxyKubeconfig = "/vme2e/proxy.kubeconfig"
	vmAdminKubeconfig = "/vme2e/admin.kubeconfig"

	// HostFromGuest is the host's loopback as qemu user networking shows
	// it to the guest.
	HostFromGuest = "10.0.2.2"
	hostFromGuest = HostFromGuest
	guestAddr     = "10.0.2.15/24"
	nodeName      = "node-a"
)
