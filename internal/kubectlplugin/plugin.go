// Package kubectlplugin is kubectl-sluice: the commands an operator runs to see
// who is limited, why, and what to do about it. It reads the cluster with
// the user's own credentials (k8s.io/cli-runtime's flags, as kubectl's),
// decides with the project's own code (internal/inject, internal/compile,
// enforcer/rules) and reaches enforcers through a port-forward of the API
// server to their admin port, with the namespace's admin token held in
// memory only.
package kubectlplugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/api/v1alpha1"
)

// ReportAPIVersion is the apiVersion of the documents -o json|yaml prints:
// reports of the plugin, not objects of the API.
const ReportAPIVersion = "kubectl-sluice.sluice.dev/v1"

// Options are what every command shares: kubectl's flags, the output
// format, the streams.
type Options struct {
	genericiooptions.IOStreams
	Flags  *genericclioptions.ConfigFlags
	Print  *genericclioptions.JSONYamlPrintFlags
	Output string
	// In is read for confirmations; Yes skips them.
	Yes bool

	// Enforcers reaches an enforcer's admin port; nil is a port-forward
	// through the API server (NewPortForwarder).
	Enforcers EnforcerDialer

	clients *Clients
}

// Clients are the API clients of one run.
type Clients struct {
	Config    *rest.Config
	Kube      kubernetes.Interface
	Client    client.Client
	Namespace string
	// Explicit says the namespace was given with --namespace.
	Explicit bool
}

// NewCommand is the kubectl-sluice command tree.
func NewCommand(streams genericiooptions.IOStreams) *cobra.Command {
	o := &Options{IOStreams: streams, Flags: genericclioptions.NewConfigFlags(true), Print: genericclioptions.NewJSONYamlPrintFlags()}
	root := &cobra.Command{
		Use:   "kubectl-sluice",
		Short: "See who Sluice limits, why, and what to do about it",
		Long: "kubectl sluice reads RateLimitPolicies, the pods they select and their enforcers.\n" +
			"It uses your kubeconfig and permissions, as kubectl does.",
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl sluice"},
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	o.Flags.AddFlags(root.PersistentFlags())
	root.PersistentFlags().StringVarP(&o.Output, "output", "o", "", "output format: "+strings.Join(o.Print.AllowedFormats(), "|")+" (empty: a table for people)")
	root.AddCommand(newStatusCommand(o), newExplainCommand(o), newSimulateCommand(o), newTopCommand(o),
		newTenantCommand(o), newUnbanCommand(o), newResetCommand(o))
	return root
}

// Scheme holds the core types and the RateLimitPolicy.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = v1alpha1.AddToScheme(s)
	return s
}

// Clients are the API clients built from kubectl's flags, once per run.
func (o *Options) Clients() (*Clients, error) {
	if o.clients != nil {
		return o.clients, nil
	}
	cfg, err := o.Flags.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	ns, explicit, err := o.Flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: Scheme()})
	if err != nil {
		return nil, err
	}
	o.clients = &Clients{Config: cfg, Kube: kube, Client: c, Namespace: ns, Explicit: explicit}
	return o.clients, nil
}

// SetClients makes the commands use c instead of the clients kubectl's
// flags describe.
func (o *Options) SetClients(c *Clients) { o.clients = c }

// structured says whether -o asks for a document rather than a table.
func (o *Options) structured() bool { return o.Output != "" }

// print writes report as -o asks (kind names the document), or, without
// -o, calls human.
func (o *Options) print(kind string, report any, human func(w io.Writer) error) error {
	if !o.structured() {
		return human(o.Out)
	}
	printer, err := o.Print.ToPrinter(o.Output)
	if err != nil {
		return err
	}
	b, err := json.Marshal(report)
	if err != nil {
		return err
	}
	obj := map[string]any{}
	if err := json.Unmarshal(b, &obj); err != nil {
		return err
	}
	obj["apiVersion"], obj["kind"] = ReportAPIVersion, kind
	return printer.PrintObj(&unstructured.Unstructured{Object: obj}, o.Out)
}

// getPolicy reads one policy, with the error a user can act on.
func (c *Clients) getPolicy(ctx context.Context, name string) (*v1alpha1.RateLimitPolicy, error) {
	p := &v1alpha1.RateLimitPolicy{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, p); err != nil {
		return nil, apiError(err, "get", "ratelimitpolicies.sluice.dev", c.Namespace, name)
	}
	return p, nil
}

// listPolicies reads the namespace's policies.
func (c *Clients) listPolicies(ctx context.Context) ([]v1alpha1.RateLimitPolicy, error) {
	list := &v1alpha1.RateLimitPolicyList{}
	if err := c.Client.List(ctx, list, client.InNamespace(c.Namespace)); err != nil {
		return nil, apiError(err, "list", "ratelimitpolicies.sluice.dev", c.Namespace, "")
	}
	return list.Items, nil
}

// listPods reads the namespace's pods.
func (c *Clients) listPods(ctx context.Context) ([]corev1.Pod, error) {
	list := &corev1.PodList{}
	if err := c.Client.List(ctx, list, client.InNamespace(c.Namespace)); err != nil {
		return nil, apiError(err, "list", "pods", c.Namespace, "")
	}
	return list.Items, nil
}

// errAborted is a confirmation answered no.
var errAborted = errors.New("aborted: nothing was changed")

// confirm asks question on Out and reads y or yes from In; --yes answers
// for the user.
func (o *Options) confirm(question string) error {
	if o.Yes {
		return nil
	}
	if o.In == nil {
		return fmt.Errorf("%s: confirm with --yes", question)
	}
	fmt.Fprintf(o.ErrOut, "%s [y/N] ", question)
	var answer string
	_, _ = fmt.Fscanln(o.In, &answer)
	switch strings.ToLower(strings.TrimSpace(answer)) {
	case "y", "yes":
		return nil
	}
	return errAborted
}
