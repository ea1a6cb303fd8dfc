// Package deploy holds the deployment files' tests, kept in a module of
// their own so that the relay's module carries no Compose or Kubernetes
// dependencies. The tests check, without a container engine or a cluster:
// docker-compose.yml through the Compose specification's loader, every
// Kubernetes manifest decoded strictly into its typed API object,
// .dockerignore against what `go build ./cmd/relay` reads, and
// sql/roles.sql (with the compose init script and its secrets) against a
// real PostgreSQL 15, role by role.
package deploy
