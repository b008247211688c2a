// Package app is the kube-ipvs-proxy command: it parses kube-proxy's
// flags (spf13/pflag) and KubeProxyConfiguration file into Options,
// validates them, and runs the chosen mode:
//
//   - the proxy (default): Watch with the kernel data plane;
//   - --dry-run --objects: the plan for manifests, without a cluster;
//   - --dry-run alone: Watch against the API server, printing each synced
//     plan and programming nothing;
//   - --preflight: the cluster listed once and planned for this node,
//     printing what would be served differently from kube-proxy, and the
//     node's kernel modules; it exits 1 on traffic that would be lost;
//   - --cleanup, --write-config-to, --init-only, --version.
//
// app wires packages together and holds no policy: decisions live in
// policy/, decoding in manifest/ and apiconv/, the loop in proxier/.
package app
