package stack

import (
	"k8s.io/client-go/rest"
)

// ControlPlane is etcd and kube-apiserver alone, with the CRDs and the
// injection webhook configuration installed (its URL a port of 127.0.0.1
// that nothing serves yet): for suites that run their own managers and
// pods, as the scale suite does with kwok.
type ControlPlane struct {
	cp   *controlPlane
	reap *reaper
}

// StartControlPlane starts etcd and kube-apiserver from assets (make
// envtest), writing its kubeconfig and logs under dir. They die with the
// calling process however it ends.
func StartControlPlane(root, assets, dir string) (*ControlPlane, error) {
	reap, err := startReaper()
	if err != nil {
		return nil, err
	}
	cp, err := startControlPlane(root, assets, dir, true, reap)
	if err != nil {
		reap.disarm()
		return nil, err
	}
	return &ControlPlane{cp: cp, reap: reap}, nil
}

// Config is an admin's client configuration.
func (c *ControlPlane) Config() *rest.Config { return c.cp.config }

// Kubeconfig is the path of an admin's kubeconfig.
func (c *ControlPlane) Kubeconfig() string { return c.cp.kubeconfig }

// Webhook is the port of 127.0.0.1 the API server calls the injection
// webhook on, and the directory of the certificate it trusts.
func (c *ControlPlane) Webhook() (port int, certDir string) { return c.cp.webhook() }

// Stop stops kube-apiserver and etcd.
func (c *ControlPlane) Stop() {
	c.cp.stop()
	c.reap.disarm()
}
