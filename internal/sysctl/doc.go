// Package sysctl owns the proxy's one seam to the kernel's one-line
// files: the sysctls under /proc/sys (IPVS, forwarding, ARP, conntrack)
// and the module parameters and CPU list under /sys. Files is the
// interface; Host is it on the running kernel; packages conntrack and
// proxier/ipvs take a Files, and tests give them a fake.
//
// It reads and writes files only, decides no value, and imports the
// standard library only.
package sysctl
