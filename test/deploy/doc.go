// Package deploy holds only tests: it checks the deployment artifacts
// (deploy/systemd, deploy/prometheus, deploy/grafana, the Dockerfile) and
// the operator docs (docs/api.md, docs/operations.md) against each other
// and against the code they describe, so a renamed metric, port, path or
// JSON field breaks the build instead of a site's dashboard. External
// checkers (systemd-analyze, promtool) run when installed and skip
// otherwise. It owns no code the daemon uses.
package deploy
