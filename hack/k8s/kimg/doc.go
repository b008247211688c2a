// Command kimg builds container images without Docker, with
// github.com/google/go-containerregistry: layers from root filesystem
// tarballs (e.g. a Debian base made by mmdebstrap) and from files, links
// and directories named on the command line, and an image config
// (entrypoint, cmd, env, user, workdir) for linux/amd64. It writes a
// docker-archive tarball, which `ctr -n k8s.io images import` and
// `docker load` read, and can push the same image to a registry.
//
//	kimg -out pause.tar -tag registry.k8s.io/pause:3.10.2 \
//	    -file bin/pause:/pause -entrypoint /pause
//
// Layers are reproducible: every entry is owned by root with a zero
// modification time, so the same inputs give the same digests. kimg knows
// nothing about the proxy or the lab; hack/cluster/images.sh and
// `make image` decide what goes into each image.
package main
