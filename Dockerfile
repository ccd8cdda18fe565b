# syntax=docker/dockerfile:1
#
# pvans container image: a static binary on distroless, run as a non-root
# user. UDP broadcast (beacons, searches, discovery) does not cross a
# container network, so on a gateway host run it with --network=host:
#
#   docker build -t pvans .
#   docker run -d --name pvans --network=host \
#     -v pvans-state:/var/lib/pvans \
#     -v /etc/pvans/pvans.yaml:/etc/pvans/pvans.yaml:ro pvans
#
# A bridged container (-p 5075:5075/tcp -p 9076:9076/tcp, and
# --http-listen :9076 since the HTTP API listens on loopback by default)
# serves only the TCP name-server role, fed by static.servers. See
# docs/operations.md.

ARG GO_VERSION=1.26

FROM golang:${GO_VERSION} AS build
WORKDIR /src
# Dependencies first, so source edits reuse the module cache layer.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=""
RUN CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -trimpath \
      -ldflags="-s -w -X github.com/pvans-project/pvans/internal/buildinfo.Version=${VERSION}" \
      -o /out/pvans ./cmd/pvans \
 && mkdir -p /out/state
# The binary must be static: the runtime image has no libc.
RUN ! ldd /out/pvans >/dev/null 2>&1

FROM gcr.io/distroless/static-debian12:nonroot AS runtime
COPY --from=build /out/pvans /usr/local/bin/pvans
COPY configs/pvans.yaml /etc/pvans/pvans.yaml
# snapshot.path is /var/lib/pvans/registry.snapshot; the directory must be
# writable by the runtime user. Mount a volume there to keep the snapshot
# across container restarts.
COPY --from=build --chown=65532:65532 /out/state /var/lib/pvans
VOLUME ["/var/lib/pvans"]
# distroless "nonroot": uid/gid 65532.
USER 65532:65532
# 5075/tcp name server, 5076/udp searches and beacons, 9076/tcp HTTP API
# and metrics (configs/pvans.yaml defaults).
EXPOSE 5075/tcp 5076/udp 9076/tcp
# distroless has no shell or curl: the binary checks its own /healthz.
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
  CMD ["/usr/local/bin/pvans", "healthz", "http://127.0.0.1:9076/healthz"]
ENTRYPOINT ["/usr/local/bin/pvans"]
CMD ["run", "--config", "/etc/pvans/pvans.yaml"]
