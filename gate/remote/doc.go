// Package remote reads what `readyspan gate --url` judges from a running readyspan's UI JSON API
// (package web): a workload's rollouts, one rollout with its old Pods' rotation spans, and Pod
// traces, each rebuilt as the trace package gate judges, so that the verdict is the same code
// whether the gate watched the cluster itself or read the daemon. Everything the daemon answers
// is bounded and checked: a malformed trace is an error naming it, never a Pod left out.
package remote
