# dlockd container image: built with the same `make install` the tests run
# (install-strip: the binaries without their debug symbols), then copied
# into a slim runtime stage with only the shared libraries dlockd and dlock
# link to (deploy/check-image.sh keeps that list honest, and ARG VERSION's
# default equal to the VERSION file's, as tests/integration/test_process.c
# does).
#
#   docker build -t dlockd .
#   docker build --build-arg VERSION="$(cat VERSION) ($(git describe --always --exclude='*'))" \
#     --build-arg SOURCE=$(git remote get-url origin) -t dlockd .
#   docker run --rm -p 127.0.0.1:8080:8080 -e DLOCKD_REDIS_URL=redis://redis:6379/0 dlockd

# what `dlockd --version` prints and the image's version label say
ARG VERSION=0.4.0
# the repository the image is built from (the source label), given by the
# build: --build-arg SOURCE=https://git.example.com/you/dlockd
ARG SOURCE=

FROM debian:bookworm-slim AS build
ARG VERSION
RUN apt-get update \
 && apt-get install -y --no-install-recommends make gcc libc6-dev pkg-config \
      libmicrohttpd-dev libjansson-dev libhiredis-dev libgnutls28-dev libcurl4-openssl-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY Makefile VERSION openapi.yaml main.c ./
COPY api api
COPY service service
COPY cli cli
COPY lua lua
COPY deploy/systemd deploy/systemd
RUN make install-strip PREFIX=/usr/local DESTDIR=/out DLOCKD_VERSION="$VERSION"

FROM debian:bookworm-slim
ARG VERSION
ARG SOURCE
LABEL org.opencontainers.image.title="dlockd" \
      org.opencontainers.image.description="Distributed locks over HTTP/JSON, kept in Redis with Redisson's layout" \
      org.opencontainers.image.version="$VERSION" \
      org.opencontainers.image.source="$SOURCE" \
      org.opencontainers.image.licenses="MIT"
# only the shared libraries dlockd and dlock link to (deploy/check-image.sh checks)
RUN apt-get update \
 && apt-get install -y --no-install-recommends libmicrohttpd12 libjansson4 libhiredis0.14 libgnutls30 libcurl4 \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --no-create-home --shell /usr/sbin/nologin --uid 10001 dlockd
# the binaries and the contract; not the systemd unit make install adds
COPY --from=build /out/usr/local/bin/ /usr/local/bin/
COPY --from=build /out/usr/local/share/dlockd/openapi.yaml /usr/local/share/dlockd/
USER 10001:10001
# Inside a container dlockd must listen beyond loopback to be reachable.
ENV DLOCKD_LISTEN=0.0.0.0:8080 \
    DLOCKD_REDIS_URL=redis://redis:6379/0
EXPOSE 8080
# dlockd probes itself: same DLOCKD_LISTEN (a changed port is followed;
# 0.0.0.0 is asked on 127.0.0.1), GET /healthz, exit 0 on 200 within 2 s
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
  CMD ["/usr/local/bin/dlockd", "--health-check"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/dlockd"]
