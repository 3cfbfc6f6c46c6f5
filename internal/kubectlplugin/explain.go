package kubectlplugin

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/enforcer/debugapi"
	statusdoc "github.com/sluice-dev/sluice/enforcer/status"
	"github.com/sluice-dev/sluice/internal/inject"
	"github.com/sluice-dev/sluice/internal/wellknown"
)

// ExplainReport is what kubectl sluice explain prints: which policies
// select a pod (or a deployment's pods), whether it gets the enforcer and
// why, in the injector's own words, and which configuration its enforcers
// run against the namespace's.
// ReasonNoLongerSelected: the pod runs an enforcer, but no policy selects
// it any more.
const ReasonNoLongerSelected = "NoLongerSelected"

type ExplainReport struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// InjectionEnabled is the namespace's sluice.dev/injection label;
	// absent when the namespace could not be read.
	InjectionEnabled *bool    `json:"injectionEnabled,omitempty"`
	Selected         []string `json:"selectedBy"`
	// Inject, Reason and Message are the injector's decision.
	Inject  bool   `json:"inject"`
	Reason  string `json:"reason"`
	Message string `json:"message,omitempty"`
	// ConfigHash is the hash of the namespace's published configuration.
	ConfigHash string           `json:"configHash,omitempty"`
	Enforcers  []EnforcerConfig `json:"enforcers,omitempty"`
	Notes      []string         `json:"notes,omitempty"`
	sidecar    *inject.EnforcerSidecar
}

// EnforcerConfig is the configuration one pod's enforcer runs.
type EnforcerConfig struct {
	Pod   string `json:"pod"`
	State string `json:"state,omitempty"`
	Hash  string `json:"configHash,omitempty"`
	// UpToDate says the enforcer runs the namespace's configuration.
	UpToDate bool `json:"upToDate"`
	// Error says why the enforcer could not be asked.
	Error string `json:"error,omitempty"`
}

// explainFlags are what the injector would know of the manager's flags.
type explainFlags struct {
	httpPort, adminPort int32
	defaultRedis        bool
	noEnforcer          bool
}

func newExplainCommand(o *Options) *cobra.Command {
	f := explainFlags{}
	cmd := &cobra.Command{
		Use:   "explain POD|deployment/NAME",
		Short: "Which policies select a pod, whether it gets the enforcer and why, and the configuration its enforcer runs",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.Clients()
			if err != nil {
				return err
			}
			report, err := o.Explain(cmd.Context(), c, args[0], f)
			if err != nil {
				return err
			}
			return o.print("ExplainReport", report, report.write)
		},
	}
	cmd.Flags().Int32Var(&f.httpPort, "enforcer-http-port", 15080, "the manager's --enforcer-http-port")
	cmd.Flags().Int32Var(&f.adminPort, "enforcer-admin-port", 15081, "the manager's --enforcer-admin-port")
	cmd.Flags().BoolVar(&f.defaultRedis, "default-redis", true, "whether the manager has a default Redis (--default-redis-url or --default-redis-secret)")
	cmd.Flags().BoolVar(&f.noEnforcer, "no-enforcer", false, "do not ask the enforcers which configuration they run (no port-forward)")
	return cmd
}

// Explain explains target: a pod's name, pod/NAME or deployment/NAME.
func (o *Options) Explain(ctx context.Context, c *Clients, target string, f explainFlags) (*ExplainReport, error) {
	kind, name, found := strings.Cut(target, "/")
	if !found {
		kind, name = "pod", target
	}
	sidecar := &inject.EnforcerSidecar{HTTPPort: f.httpPort, AdminPort: f.adminPort}
	if f.defaultRedis {
		sidecar.DefaultRedisURL = "redis://default"
	}
	r := &ExplainReport{Namespace: c.Namespace, Name: name, Selected: []string{}, sidecar: sidecar}
	var pod *corev1.Pod
	var pods []*corev1.Pod
	switch strings.ToLower(kind) {
	case "pod", "pods", "po":
		r.Kind = "Pod"
		pod = &corev1.Pod{}
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, pod); err != nil {
			return nil, apiError(err, "get", "pods", c.Namespace, name)
		}
		pods = []*corev1.Pod{pod}
	case "deployment", "deployments", "deploy":
		r.Kind = "Deployment"
		d := &appsv1.Deployment{}
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, d); err != nil {
			return nil, apiError(err, "get", "deployments.apps", c.Namespace, name)
		}
		// The template is what the webhook sees of the pods to come.
		pod = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Labels: d.Spec.Template.Labels,
			Annotations: d.Spec.Template.Annotations}, Spec: d.Spec.Template.Spec}
		selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil {
			return nil, fmt.Errorf("deployment %s: selector: %w", name, err)
		}
		all, err := c.listPods(ctx)
		if err != nil {
			return nil, err
		}
		for i := range all {
			if selector.Matches(labels.Set(all[i].Labels)) && all[i].DeletionTimestamp == nil {
				pods = append(pods, &all[i])
			}
		}
	default:
		return nil, fmt.Errorf("explain takes a pod (NAME or pod/NAME) or deployment/NAME, not %q", target)
	}
	policies, err := c.listPolicies(ctx)
	if err != nil {
		return nil, err
	}
	enabled := true
	ns := &corev1.Namespace{}
	if err := c.Client.Get(ctx, client.ObjectKey{Name: c.Namespace}, ns); err == nil {
		enabled = ns.Labels[wellknown.InjectionNamespaceLabel] == wellknown.InjectionEnabled
		r.InjectionEnabled = &enabled
	} else {
		r.Notes = append(r.Notes, fmt.Sprintf("namespace %s could not be read (%v): assuming it is labelled %s=%s",
			c.Namespace, apiError(err, "get", "namespaces", "", c.Namespace), wellknown.InjectionNamespaceLabel, wellknown.InjectionEnabled))
	}
	d := inject.DecideInNamespace(pod, policies, sidecar, enabled)
	for _, p := range d.Selected {
		r.Selected = append(r.Selected, p.Name)
	}
	r.Inject, r.Reason, r.Message = d.Inject, d.Reason, d.Message
	if d.Reason == inject.ReasonNamespaceNotEnabled {
		r.Message = fmt.Sprintf("namespace %s is not labelled %s=%s, so the injector never sees its pods: label it, then restart the pods",
			c.Namespace, wellknown.InjectionNamespaceLabel, wellknown.InjectionEnabled)
	}
	if r.Kind == "Pod" && d.Reason == inject.ReasonInjected {
		// Decide says what the webhook would do with the pod as it is now;
		// a running pod without the sidecar was created before.
		r.Message += "; this pod runs without it: it was created before the policy or injection, so restart it"
		r.Inject = false
		r.Reason = "NotInjectedYet"
	}
	if d.Reason == inject.ReasonNotSelected && slices.ContainsFunc(pods, inject.HasEnforcer) {
		// Injected once, selected no more: the enforcer runs on, passing
		// traffic through, until the pod is recreated without it.
		r.Reason = ReasonNoLongerSelected
		r.Message = "no policy selects it now: its enforcer passes traffic through unlimited, and the sidecar goes when the pod is recreated"
	}
	cm := &corev1.ConfigMap{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: wellknown.ConfigMapName}, cm); err == nil {
		r.ConfigHash = cm.Annotations[wellknown.ConfigHashAnnotation]
	} else if err := apiError(err, "get", "configmaps", c.Namespace, wellknown.ConfigMapName); err != nil {
		r.Notes = append(r.Notes, err.Error())
	}
	for _, p := range pods {
		if !inject.HasEnforcer(p) {
			if r.Kind == "Deployment" {
				r.Enforcers = append(r.Enforcers, EnforcerConfig{Pod: p.Name, Error: "no enforcer: restart the pod once the decision above is Injected"})
			}
			continue
		}
		ec := EnforcerConfig{Pod: p.Name}
		if f.noEnforcer {
			ec.Error = "not asked (--no-enforcer)"
		} else {
			o.enforcerConfig(ctx, c, p, &ec)
		}
		ec.UpToDate = ec.Hash != "" && ec.Hash == r.ConfigHash
		r.Enforcers = append(r.Enforcers, ec)
	}
	return r, nil
}

// enforcerConfig asks pod's enforcer for its /status.
func (o *Options) enforcerConfig(ctx context.Context, c *Clients, pod *corev1.Pod, ec *EnforcerConfig) {
	if pod.Status.Phase != corev1.PodRunning {
		ec.Error = fmt.Sprintf("pod is %s", pod.Status.Phase)
		return
	}
	e, err := o.openEnforcer(ctx, c, pod, debugapi.Read)
	if err != nil {
		ec.Error = err.Error()
		return
	}
	defer e.Close()
	var doc statusdoc.Document
	if err := e.call(ctx, "GET", statusdoc.Path, nil, &doc); err != nil {
		ec.Error = err.Error()
		return
	}
	ec.State, ec.Hash = doc.Config.State, doc.Config.Hash
}

func (r *ExplainReport) write(w io.Writer) error {
	fmt.Fprintf(w, "%s %s/%s\n", r.Kind, r.Namespace, r.Name)
	switch {
	case r.InjectionEnabled == nil:
		fmt.Fprintln(w, "  Namespace injection: unknown")
	case *r.InjectionEnabled:
		fmt.Fprintf(w, "  Namespace injection: enabled (%s=%s)\n", wellknown.InjectionNamespaceLabel, wellknown.InjectionEnabled)
	default:
		fmt.Fprintf(w, "  Namespace injection: not enabled (no %s=%s label)\n", wellknown.InjectionNamespaceLabel, wellknown.InjectionEnabled)
	}
	if len(r.Selected) == 0 {
		fmt.Fprintln(w, "  Selected by: no policy")
	} else {
		fmt.Fprintf(w, "  Selected by: %s\n", strings.Join(r.Selected, ", "))
	}
	verdict := "no enforcer"
	if r.Inject {
		verdict = "enforcer injected"
	}
	switch r.Reason {
	case inject.ReasonAlreadyInjected:
		verdict = "runs an enforcer"
	case ReasonNoLongerSelected:
		verdict = "runs an enforcer, selected by no policy"
	}
	fmt.Fprintf(w, "  Decision: %s (%s)\n", verdict, r.Reason)
	if r.Message != "" {
		fmt.Fprintf(w, "    %s\n", r.Message)
	}
	fmt.Fprintf(w, "  Namespace configuration: %s\n", dash(r.ConfigHash))
	for _, e := range r.Enforcers {
		switch {
		case e.Error != "":
			fmt.Fprintf(w, "  Enforcer of %s: %s\n", e.Pod, e.Error)
		case e.UpToDate:
			fmt.Fprintf(w, "  Enforcer of %s: %s, configuration %s (up to date)\n", e.Pod, e.State, e.Hash)
		default:
			fmt.Fprintf(w, "  Enforcer of %s: %s, configuration %s (not the namespace's: it has not reloaded yet, see its logs)\n", e.Pod, e.State, dash(e.Hash))
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "  ! %s\n", n)
	}
	return nil
}
