// Package cputime reports, in Go benchmarks, the CPU time the process
// used per operation (user and system, from getrusage, the collector's
// included): on a shared machine the wall time per operation is partly
// the neighbours', and the process's CPU time is the cost.
package cputime
