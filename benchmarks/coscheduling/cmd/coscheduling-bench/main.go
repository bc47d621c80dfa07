// A kube-scheduler with the scheduler-plugins' Coscheduling plugin, the gang Kubeflow's training
// operator uses (--gang-scheduler-name), for benchmarks/vs_kubeflow.py's gang-against-gang runs.
// Only Coscheduling is registered: the comparison is of gangs, not of the other plugins.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	// The plugin's args types (CoschedulingArgs) in the scheduler's config scheme.
	_ "sigs.k8s.io/scheduler-plugins/apis/config/scheme"
	"sigs.k8s.io/scheduler-plugins/pkg/coscheduling"
)

func main() {
	command := app.NewSchedulerCommand(app.WithPlugin(coscheduling.Name, coscheduling.New))
	os.Exit(cli.Run(command))
}
