# syntax=docker/dockerfile:1
#
# The kube-ipvs-proxy image: one static binary at /usr/local/bin/kube-ipvs-proxy
# on distroless static (no shell, no libc, no iptables, no modprobe).
#
#   docker build -t REGISTRY/kube-ipvs-proxy:TAG .
#   docker buildx build --platform linux/amd64,linux/arm64 -t REGISTRY/kube-ipvs-proxy:TAG --push .
#
# The builder runs on the build machine's platform and cross-compiles for
# the target: the binary is pure Go (CGO_ENABLED=0), so no emulation.

FROM --platform=$BUILDPLATFORM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG TARGETOS
ARG TARGETARCH
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags '-s -w' -o /out/kube-ipvs-proxy ./cmd/kube-ipvs-proxy

# Not the :nonroot variant: the proxy programs IPVS, links and nftables over
# netlink and writes /proc/sys, as root in a privileged container (see
# deploy/README.md). distroless/static's default user is already root; the
# USER line says so on purpose. Pin the base by digest for a reproducible
# release (gcr.io/distroless/static-debian12@sha256:...).
FROM gcr.io/distroless/static-debian12
COPY --from=build /out/kube-ipvs-proxy /usr/local/bin/kube-ipvs-proxy
USER 0
ENTRYPOINT ["/usr/local/bin/kube-ipvs-proxy"]
