//go:build tools

// Package tools pins the Kubernetes commands that scripts/control-plane.sh
// builds. The build tag keeps it out of every real build; it only exists so
// that `go mod tidy` records the full dependency graph of these main packages
// in go.sum.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
