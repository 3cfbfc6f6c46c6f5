# syntax=docker/dockerfile:1
# sluice-enforcer: the rate limiting sidecar the manager injects into pods.
#
# Build from source in a Go image, from the repository root (as CI does):
#   docker build -f build/enforcer.Dockerfile --build-arg VERSION=v0.1.0 -t sluice-enforcer:v0.1.0 .
#
# The runtime image is scratch: two static binaries (sluice-enforcer, and
# sluice-policy-compile, which its --policy-file runs) and the CA bundle (for
# rediss:// Redis), nothing to patch. BASE_IMAGE may name another minimal
# non-root image from the registry you trust (a distroless "static" image,
# for example); image names here are short on purpose, your container engine
# resolves them.
#
# BINARIES picks the stage the runtime stage copies its files from: "build"
# (the default) compiles them here; "prebuilt" takes them from a context
# holding the binaries and the CA bundle, built on the host by hack/images.sh
# (make images, where no Go image can be pulled). The runtime stage is the
# one definition of the image either way, and make node-images reads it to
# write the same image as an OCI archive. Podman 4.3 (Debian 12's) needs
# --build-arg BINARIES=build spelled out: it skips a stage named only by an
# ARG's default.
ARG GO_IMAGE=golang:1.26
ARG BASE_IMAGE=scratch
ARG BINARIES=build

FROM --platform=$BUILDPLATFORM ${GO_IMAGE} AS build
ARG TARGETOS
ARG TARGETARCH
ARG VERSION=devel
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/sluice-enforcer ./cmd/enforcer && \
    CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/sluice-policy-compile ./cmd/policy-compile

FROM scratch AS prebuilt
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY sluice-enforcer /out/sluice-enforcer
COPY sluice-policy-compile /out/sluice-policy-compile

FROM ${BINARIES} AS binaries

FROM ${BASE_IMAGE}
COPY --from=binaries /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=binaries /out/sluice-enforcer /sluice-enforcer
COPY --from=binaries /out/sluice-policy-compile /sluice-policy-compile
# 65532 is the conventional "nonroot" user; numeric, so no /etc/passwd is
# needed and runAsNonRoot can verify it.
USER 65532:65532
ENTRYPOINT ["/sluice-enforcer"]
