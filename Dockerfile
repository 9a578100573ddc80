# dlockd container image: built with the same `make install` the tests run,
# then copied into a slim runtime stage with only the shared libraries
# dlockd and dlock link to (deploy/check-image.sh keeps that list honest).
#
#   docker build -t dlockd .
#   docker run --rm -p 127.0.0.1:8080:8080 -e DLOCKD_REDIS_URL=redis://redis:6379/0 dlockd

FROM debian:bookworm-slim AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends make gcc libc6-dev pkg-config \
      libmicrohttpd-dev libjansson-dev libhiredis-dev libgnutls28-dev libcurl4-openssl-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY Makefile openapi.yaml main.c ./
COPY api api
COPY service service
COPY cli cli
COPY lua lua
RUN make install PREFIX=/usr/local DESTDIR=/out

FROM debian:bookworm-slim
# only the shared libraries dlockd and dlock link to (deploy/check-image.sh checks)
RUN apt-get update \
 && apt-get install -y --no-install-recommends libmicrohttpd12 libjansson4 libhiredis0.14 libgnutls30 libcurl4 \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --no-create-home --shell /usr/sbin/nologin --uid 10001 dlockd
COPY --from=build /out/usr/local/ /usr/local/
USER 10001:10001
# Inside a container dlockd must listen beyond loopback to be reachable.
ENV DLOCKD_LISTEN=0.0.0.0:8080 \
    DLOCKD_REDIS_URL=redis://redis:6379/0
EXPOSE 8080
# bash's /dev/tcp: no curl needed in the image
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
  CMD ["/bin/bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/8080 && printf 'GET /healthz HTTP/1.0\\r\\n\\r\\n' >&3 && head -n 1 <&3 | grep -q ' 200 '"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/dlockd"]
