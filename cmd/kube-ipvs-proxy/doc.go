// Command kube-ipvs-proxy is a drop-in replacement for kube-proxy's IPVS
// mode. See README.md.
//
// It owns only the process: flags to Options (package app), Validate,
// Run until SIGTERM or SIGINT, and the exit code. Everything else is in
// app and the packages it wires; main holds no logic of its own.
package main
