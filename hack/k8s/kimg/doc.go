// Command kimg builds container images without Docker, with
// github.com/google/go-containerregistry: layers from root filesystem
// tarballs (e.g. a Debian base made by mmdebstrap) and from files, links
// and directories named on the command line, and an image config
// (entrypoint, cmd, env, user, workdir, labels) for each -platform (default
// kimg's own). `{arch}` in a -file or -rootfs source names each platform's
// own input, e.g. its binary. It writes one platform's image as a
// docker-archive tarball (-out), which `ctr -n k8s.io images import` and
// `docker load` read; the OCI image index of every platform as an OCI image
// layout directory (-layout), which `skopeo copy oci:DIR:REF` and `crane
// push` read; and can push the image or index to a registry (-push).
//
//	kimg -out pause.tar -tag registry.k8s.io/pause:3.10.2 \
//	    -file bin/pause:/pause -entrypoint /pause
//	kimg -layout p.oci -out p.tar -tag localhost/p:v1 -platform linux/amd64 -platform linux/arm64 \
//	    -file 'out/{arch}/p:/usr/local/bin/p:0755' -entrypoint /usr/local/bin/p -created 2026-11-28T10:24:37Z
//
// Images are reproducible: every layer entry is owned by root with a zero
// modification time, entries are sorted, and the config's times are
// -created (default the Unix epoch), so the same inputs give the same
// digests, the index's included. kimg knows nothing about the proxy or the
// lab; hack/cluster/images.sh and `make image` decide what goes into each
// image. Its tests build an index from fixtures; TestShippedLayout checks
// the proxy's own layout when KIMG_LAYOUT names it (make release sets it).
// tools/ is a module of its own that pins the SBOM generator
// (cyclonedx-gomod) images.sh runs.
package main
