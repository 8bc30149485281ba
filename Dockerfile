# syntax=docker/dockerfile:1
# readyspan's image for those who build with Docker (or BuildKit, Podman, Buildah).
# `make image` builds the same layout without Docker (deploy/image/build.sh): the static binary as
# /readyspan, /etc/passwd and /etc/group with nonroot (65532), a CA bundle, user 65532:65532.
#
#   docker build -t readyspan:dev .
#   docker build --build-arg VERSION=$(git describe --tags --always) -t readyspan:dev .

ARG GO_IMAGE=golang:1.26

FROM --platform=$BUILDPLATFORM ${GO_IMAGE} AS build
ARG TARGETOS=linux
ARG TARGETARCH
ARG VERSION=dev
ENV GOMODCACHE=/gocache/mod GOCACHE=/gocache/build
WORKDIR /src
COPY go.mod go.sum* ./
RUN --mount=type=cache,target=/gocache go mod download
COPY . .
RUN --mount=type=cache,target=/gocache \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath \
      -ldflags "-s -w -X main.version=${VERSION}" \
      -o /out/readyspan ./cmd/readyspan
# The root filesystem of the final image, as deploy/image/build.go lays it out.
RUN mkdir -p /rootfs/etc/ssl/certs /rootfs/home/nonroot /rootfs/tmp \
 && printf '%s\n' \
      'root:x:0:0:root:/root:/sbin/nologin' \
      'nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin' \
      'nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin' > /rootfs/etc/passwd \
 && printf '%s\n' 'root:x:0:' 'nobody:x:65534:' 'nonroot:x:65532:' > /rootfs/etc/group \
 && cp /etc/ssl/certs/ca-certificates.crt /rootfs/etc/ssl/certs/ca-certificates.crt \
 && chmod 0700 /rootfs/home/nonroot \
 && chmod 1777 /rootfs/tmp \
 && cp /out/readyspan /rootfs/readyspan

FROM scratch
ARG VERSION=dev
COPY --from=build /rootfs/ /
COPY --from=build --chown=65532:65532 /rootfs/home/nonroot /home/nonroot
ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
USER 65532:65532
WORKDIR /
EXPOSE 8080
LABEL org.opencontainers.image.title="readyspan" \
      org.opencontainers.image.source="https://github.com/readyspan/readyspan" \
      org.opencontainers.image.version="${VERSION}"
ENTRYPOINT ["/readyspan"]
