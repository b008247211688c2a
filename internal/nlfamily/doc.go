// Package nlfamily names the netlink families the data plane opens and
// the kernel module behind each, for start-up errors that say what a node
// lacks, and lists the families a process holds open, so that tests can
// check that no other family is opened (a minimal node may not be able to
// load, say, xfrm_user). It imports no netlink library and decides
// nothing about what is sent on a socket.
package nlfamily
