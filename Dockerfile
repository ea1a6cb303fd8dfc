# The relay image: one static binary on distroless, running as the nonroot
# user (65532). Build context: see .dockerignore.
#   docker build -t deltabus/relay:dev .
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=0.1.0-dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.Version=${VERSION}" -o /relay ./cmd/relay \
 && mkdir -p /empty

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /relay /relay
# A local store: mount a volume here (DELTABUS_STORE=file:///var/lib/deltabus).
# The directory belongs to the nonroot user, and Docker copies that ownership
# to a new named volume mounted on it.
COPY --from=build --chown=65532:65532 /empty /var/lib/deltabus
USER 65532:65532
# /metrics, /healthz, /readyz when DELTABUS_METRICS_ADDR=0.0.0.0:9464.
EXPOSE 9464
ENTRYPOINT ["/relay"]
CMD ["run"]
