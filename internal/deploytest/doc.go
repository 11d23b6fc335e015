// Package deploytest holds holdfast's tests on real Redis deployments — a
// 3-master Redis Cluster, a primary with a replica and three Sentinels —
// which the tests start themselves (package internal/topology). They live in
// their own package so that their time shows apart in `go test ./...`.
package deploytest
