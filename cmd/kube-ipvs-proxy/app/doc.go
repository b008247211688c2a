// Package app is the kube-ipvs-proxy command: it parses kube-proxy's
// flags (spf13/pflag) into Options, validates them, and runs the chosen
// mode. Today that is --dry-run --objects, which loads manifests, feeds
// them through kubeapi into the policy engine and prints the plan.
//
// app wires packages together and holds no policy: decisions live in
// policy/, decoding in manifest/ and kubeapi/.
package app
