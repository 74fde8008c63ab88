# vnest-syncer image (the syncer container of every virtual cluster), built from this
# workspace (context: the repository root):
#   docker build -f images/vnest-syncer.Dockerfile -t ghcr.io/vnest-dev/vnest-syncer:0.1.0 .
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p vnest-syncer

# Distroless with glibc (ring links to it), no shell, non-root.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release/vnest-syncer /usr/local/bin/vnest-syncer
USER 65532:65532
EXPOSE 8443
ENTRYPOINT ["/usr/local/bin/vnest-syncer"]
