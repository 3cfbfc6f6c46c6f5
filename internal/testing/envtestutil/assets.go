package envtestutil

import (
	"fmt"
	"os"
	"path/filepath"
)

// Assets is the folder holding etcd and kube-apiserver: KUBEBUILDER_ASSETS,
// or bin/k8s under the checkout root. It is an error, in one line that says
// what to run, when either binary is missing, so that a suite stops before
// it starts anything.
func Assets(root string) (string, error) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = filepath.Join(root, "bin", "k8s")
	}
	for _, name := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(assets, name)); err != nil {
			return assets, fmt.Errorf("%s has no %s: run make envtest, which builds etcd and kube-apiserver there (make test does it too)", assets, name)
		}
	}
	return assets, nil
}
