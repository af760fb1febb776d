# syntax=docker/dockerfile:1
# kin-infer's HTTP server (OpenAI's API) in a container: docs/install.md.
#
#   docker build -t kin-infer .
#   docker run --rm -p 8080:8080 -v /path/to/all-MiniLM-L6-v2:/models/model:ro kin-infer
#
# The model is mounted, never baked in: the image is the engine only (~85 MB). Any other
# `kin-infer` subcommand runs too: `docker run --rm -v ...:/models/model:ro kin-infer describe
# --model /models/model`.

# --- build: the default features (pure Rust, CPU, no TLS stack) -------------------------
FROM rust:1-slim-bookworm AS build
WORKDIR /src
COPY . .
# The workspace keeps debug info in release builds for profiling; the image does not need it
# (50 MB of the 60 MB binary). The cache mounts keep crates.io's downloads and the target dir
# between builds, so a rebuild after a source change compiles only the workspace crates; the
# binary is copied out in the same step because a cache mount is not part of the layer.
ENV CARGO_PROFILE_RELEASE_DEBUG=0 \
    CARGO_PROFILE_RELEASE_STRIP=true
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p kin-infer-cli \
    && cp target/release/kin-infer /usr/local/bin/kin-infer

# --- runtime --------------------------------------------------------------------------
# debian-slim rather than distroless: the health check needs a shell (bash's /dev/tcp), and
# the binary links only glibc, libm and libgcc_s, all in the base image; nothing is installed.
FROM debian:bookworm-slim
COPY --from=build /usr/local/bin/kin-infer /usr/local/bin/kin-infer
# A fixed uid/gid so that a mounted model only needs to be world-readable (or owned by 10001).
RUN groupadd --system --gid 10001 kin \
    && useradd --system --uid 10001 --gid kin --home-dir /home/kin --create-home kin \
    && mkdir -p /models && chown kin:kin /models
USER 10001:10001
WORKDIR /home/kin
# `--model org/name` reads the Hugging Face cache: mount one at /models/hf to use it.
ENV HF_HOME=/models/hf
EXPOSE 8080
# /health answers 200 once every model is loaded, 503 while loading or draining
# (docs/server.md). Probed without curl: bash's /dev/tcp, one HTTP/1.0 request, first line.
# A CMD that moves the port off 8080 needs `--health-cmd` at `docker run` to match.
HEALTHCHECK --interval=30s --timeout=5s --start-period=120s --retries=3 \
    CMD ["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/8080 && printf 'GET /health HTTP/1.0\\r\\nHost: localhost\\r\\n\\r\\n' >&3 && head -n 1 <&3 | grep -q ' 200 '"]
ENTRYPOINT ["kin-infer"]
# 0.0.0.0: inside a container the loopback is unreachable from the published port.
CMD ["serve", "--host", "0.0.0.0", "--port", "8080", "--model", "/models/model"]
