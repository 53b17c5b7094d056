//go:build tools

// Package tools pins the scheduler-plugins kube-scheduler (the Coscheduling
// baseline of the gang benchmark) that scripts/control-plane.sh builds. The
// build tag keeps it out of every real build; it only exists so that
// `go mod tidy` records the full dependency graph of that main package in
// go.sum.
package tools

import (
	_ "sigs.k8s.io/scheduler-plugins/cmd/scheduler"
)
