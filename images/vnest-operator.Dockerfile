# vnest-operator image, built from this workspace (context: the repository root):
#   docker build -f images/vnest-operator.Dockerfile -t ghcr.io/vnest-dev/vnest-operator:0.1.0 .
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p vnest-operator

# Distroless with glibc (ring links to it), no shell, non-root.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release/vnest-operator /usr/local/bin/vnest-operator
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/vnest-operator"]
