package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	. "github.com/onsi/gomega/gstruct"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/enforcer/debugapi"
	"github.com/sluice-dev/sluice/internal/kubectlplugin"
	"github.com/sluice-dev/sluice/internal/testing/stack"
)

// updateGolden rewrites the golden files of kubectl sluice's output:
// go test ./test/e2e/ -run TestE2E -args -update-golden
var updateGolden = flag.Bool("update-golden", false, "rewrite test/e2e/testdata/plugin/*.golden")

const pluginPolicyFile = "testdata/plugin/shop-policy.yaml"

// kubectlSluice runs kubectl-sluice's command tree with the suite's
// kubeconfig, stdin as its input; it returns what it printed.
func kubectlSluice(ctx context.Context, stdin string, args ...string) (string, error) {
	var out, errOut bytes.Buffer
	cmd := kubectlplugin.NewCommand(genericiooptions.IOStreams{In: strings.NewReader(stdin), Out: &out, ErrOut: &errOut})
	cmd.SetArgs(append([]string{"--kubeconfig", sluice.Kubeconfig}, args...))
	err := cmd.ExecuteContext(ctx)
	return out.String(), err
}

var (
	goldenTime = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`)
	goldenHash = regexp.MustCompile(`\b[0-9a-f]{16,64}\b`)
	goldenWait = regexp.MustCompile(`Retry-After \d+s`)
)

// expectGolden compares out, with times and hashes masked, to
// testdata/plugin/NAME.golden.
func expectGolden(name, out string) {
	GinkgoHelper()
	out = goldenTime.ReplaceAllString(out, "<time>")
	out = goldenHash.ReplaceAllString(out, "<hash>")
	out = goldenWait.ReplaceAllString(out, "Retry-After <n>s")
	path := filepath.Join("testdata", "plugin", name+".golden")
	if *updateGolden {
		Expect(os.WriteFile(path, []byte(out), 0o644)).To(Succeed())
	}
	want, err := os.ReadFile(path)
	Expect(err).NotTo(HaveOccurred(), "run with -args -update-golden to write it")
	Expect(out).To(Equal(string(want)), "kubectl sluice output against %s", path)
}

// transcript runs kubectl sluice once per argument list and returns what a
// terminal shows: each command line (without --kubeconfig), its output,
// and a failure as cmd/kubectl-sluice prints it.
func transcript(ctx context.Context, runs ...[]string) string {
	var b strings.Builder
	for _, args := range runs {
		out, err := kubectlSluice(ctx, "", args...)
		fmt.Fprintf(&b, "$ kubectl sluice %s\n%s", strings.Join(args, " "), out)
		if err != nil {
			fmt.Fprintf(&b, "error: %v\n", err)
		}
	}
	return b.String()
}

var _ = Describe("kubectl sluice", Ordered, func() {
	const namespace = "e2e-plugin"
	var eps []stack.Endpoint
	// carolReads is the salted hash of tenant carol under rule reads, as
	// simulate --from-cluster names it.
	var carolReads string
	BeforeAll(func(ctx SpecContext) {
		policyYAML, err := os.ReadFile(pluginPolicyFile)
		Expect(err).NotTo(HaveOccurred())
		// deploy, with the pods bound to the stand-in kubelet's Node, which
		// pods/portforward needs.
		Expect(sluice.CreateNamespace(ctx, namespace)).To(Succeed())
		policies, err := stack.ParsePolicies(policyYAML)
		Expect(err).NotTo(HaveOccurred())
		Expect(sluice.CreatePolicies(ctx, namespace, policies...)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(policy(ctx, namespace, "shop").Status.ObservedGeneration).To(BeEquivalentTo(1))
		}).Should(Succeed())
		for _, name := range []string{"shop-0", "shop-1"} {
			pod := stack.AppPod(namespace, name, map[string]string{"app": "shop"}, 8080)
			pod.Spec.NodeName = stack.NodeName
			Expect(sluice.Client.Create(ctx, pod)).To(Succeed())
		}
		eps, err = sluice.WaitReady(ctx, namespace, "shop-0", "shop-1")
		Expect(err).NotTo(HaveOccurred())
		expectConfigLoaded(ctx, namespace, eps)
		expectReady(ctx, namespace, "shop", 2)
		plain := stack.AppPod(namespace, "plain", map[string]string{"app": "other"}, 8080)
		Expect(sluice.Client.Create(ctx, plain)).To(Succeed())
	})

	It("status shows the policy's enforcers, modes and conditions on one screen", func(ctx SpecContext) {
		out, err := kubectlSluice(ctx, "", "-n", namespace, "status")
		Expect(err).NotTo(HaveOccurred())
		expectGolden("status", out)

		out, err = kubectlSluice(ctx, "", "-n", namespace, "status", "shop", "-o", "json")
		Expect(err).NotTo(HaveOccurred())
		var report kubectlplugin.StatusReport
		Expect(json.Unmarshal([]byte(out), &report)).To(Succeed(), "-o json parses: %s", out)
		Expect(report.Policies).To(HaveLen(1))
		Expect(report.Policies[0].Enforcers.Ready).To(BeEquivalentTo(2))
		Expect(out).To(ContainSubstring(`"kind": "StatusReport"`))

		out, err = kubectlSluice(ctx, "", "-n", namespace, "status", "shop", "-o", "yaml")
		Expect(err).NotTo(HaveOccurred())
		Expect(yaml.Unmarshal([]byte(out), &report)).To(Succeed())
		Expect(report.Policies[0].Name).To(Equal("shop"))
	})

	It("every command on a missing policy says it is not there", func(ctx SpecContext) {
		expectGolden("error-missing-policy", transcript(ctx,
			[]string{"-n", namespace, "status", "nope"},
			[]string{"-n", namespace, "top", "nope"},
			[]string{"-n", namespace, "tenant", "nope", "alice"},
			[]string{"-n", namespace, "reset", "nope", "alice", "--yes"}))
		_, err := kubectlSluice(ctx, "", "-n", namespace, "status", "nope")
		Expect(err).To(MatchError(`ratelimitpolicies.sluice.dev "nope" not found in namespace e2e-plugin`))
	})

	It("explain says a selected pod runs an enforcer with the namespace's configuration, through a port-forward", func(ctx SpecContext) {
		out, err := kubectlSluice(ctx, "", "-n", namespace, "explain", eps[0].Pod)
		Expect(err).NotTo(HaveOccurred())
		expectGolden("explain-injected", out)
		Expect(out).To(ContainSubstring("(up to date)"))

		out, err = kubectlSluice(ctx, "", "-n", namespace, "explain", "pod/"+eps[0].Pod, "-o", "json")
		Expect(err).NotTo(HaveOccurred())
		var report kubectlplugin.ExplainReport
		Expect(json.Unmarshal([]byte(out), &report)).To(Succeed())
		Expect(report.Enforcers).To(HaveLen(1))
		Expect(report.Enforcers[0].UpToDate).To(BeTrue(), "the enforcer's /status hash, read through the API server's port-forward: %+v", report.Enforcers[0])
	})

	It("explain says why a pod runs no enforcer", func(ctx SpecContext) {
		out, err := kubectlSluice(ctx, "", "-n", namespace, "explain", "plain")
		Expect(err).NotTo(HaveOccurred())
		expectGolden("explain-not-selected", out)

		idle, err := stack.ParsePolicies([]byte(`
apiVersion: sluice.dev/v1alpha1
kind: RateLimitPolicy
metadata: {name: idle}
spec:
  selector: {matchLabels: {app: other}}
  upstreamPort: 8080
  rules: [{name: all, limits: [{requests: 1, period: 1s}]}]
`))
		Expect(err).NotTo(HaveOccurred())
		Expect(sluice.CreatePolicies(ctx, namespace, idle...)).To(Succeed())
		Eventually(func() (string, error) {
			return kubectlSluice(ctx, "", "-n", namespace, "explain", "plain", "--no-enforcer")
		}).Should(ContainSubstring("Selected by: idle"))
		_, err = kubectlSluice(ctx, "", "-n", namespace, "tenant", "idle", "alice")
		Expect(err).To(MatchError("no running pod selected by policy idle has an enforcer: kubectl sluice explain POD says why"))
		expectGolden("error-no-enforcer", transcript(ctx,
			[]string{"-n", namespace, "tenant", "idle", "alice"},
			[]string{"-n", namespace, "top", "idle"},
			[]string{"-n", namespace, "unban", "idle", "alice", "--yes"}))
		out, err = kubectlSluice(ctx, "", "-n", namespace, "explain", "plain", "--no-enforcer")
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(ContainSubstring("NotInjectedYet"), "created before the policy: restart it")
		_, err = kubectlSluice(ctx, "", "-n", namespace, "explain", "deployment/none")
		Expect(err).To(MatchError(`deployments.apps "none" not found in namespace e2e-plugin`))
	})

	It("simulate names the rule and limit the enforcer applies to the same request", func(ctx SpecContext) {
		expectGolden("simulate", transcript(ctx,
			[]string{"-n", namespace, "simulate", "-f", pluginPolicyFile, "--tenant", "carol", "--method", "GET", "--path", "/v1/items"},
			[]string{"-n", namespace, "simulate", "-f", pluginPolicyFile, "--tenant", "carol", "--path", "/healthz"},
			[]string{"-n", namespace, "simulate", "-f", pluginPolicyFile, "--tenant", "carol", "--path", "/v1/items", "--from-cluster"}))

		out, err := kubectlSluice(ctx, "", "-n", namespace, "simulate", "-f", pluginPolicyFile, "--tenant", "carol",
			"--method", "GET", "--path", "/v1/items", "-o", "json")
		Expect(err).NotTo(HaveOccurred())
		var sim kubectlplugin.SimulateReport
		Expect(json.Unmarshal([]byte(out), &sim)).To(Succeed(), "-o json parses: %s", out)
		Expect(sim.Namespace).To(Equal(namespace))
		Expect(sim.ExemptBy).To(BeEmpty())
		Expect(sim.Rules).To(HaveLen(1))
		Expect(sim.Rules[0]).To(MatchFields(IgnoreExtras, Fields{"Policy": Equal("shop"), "Rule": Equal("reads"),
			"Mode": Equal("Enforce"), "Algorithm": Equal("FixedWindow"), "Identity": Equal("carol"), "Keys": BeEmpty()}))
		Expect(sim.Rules[0].Windows).To(Equal([]kubectlplugin.SimulatedWindow{{Requests: 5, PeriodSeconds: 60}}))
		limit := int(sim.Rules[0].Windows[0].Requests)

		replies := spread(eps, limit+2, http.MethodGet, "/v1/items", "X-Tenant-ID", "carol")
		Expect(codes(replies)).To(Equal(map[int]int{http.StatusOK: limit, http.StatusTooManyRequests: 2}),
			"the enforcers admit what simulate says the rule allows")

		out, err = kubectlSluice(ctx, "", "-n", namespace, "simulate", "-f", pluginPolicyFile, "--tenant", "carol",
			"--path", "/healthz", "-o", "json")
		Expect(err).NotTo(HaveOccurred())
		sim = kubectlplugin.SimulateReport{}
		Expect(json.Unmarshal([]byte(out), &sim)).To(Succeed(), "-o json parses: %s", out)
		Expect(sim.ExemptBy).To(Equal([]string{"shop/healthz"}))
		Expect(sim.Rules).To(BeEmpty())
		Expect(request(eps[0], http.MethodGet, "/healthz", "X-Tenant-ID", "carol").code).To(Equal(http.StatusOK), "the exempt path is not limited")

		out, err = kubectlSluice(ctx, "", "-n", namespace, "simulate", "-f", pluginPolicyFile, "--tenant", "carol",
			"--path", "/v1/items", "--from-cluster", "-o", "json")
		Expect(err).NotTo(HaveOccurred())
		sim = kubectlplugin.SimulateReport{}
		Expect(json.Unmarshal([]byte(out), &sim)).To(Succeed(), "-o json parses: %s", out)
		Expect(sim.Rules[0].Keys).To(HaveLen(1))
		Expect(sim.Rules[0].Keys[0]).To(ContainSubstring(sim.Rules[0].TenantHash))
		n, err := sluice.Redis.Client().Exists(ctx, sim.Rules[0].Keys[0]).Result()
		Expect(err).NotTo(HaveOccurred())
		Expect(n).To(BeEquivalentTo(1), "the key simulate names is the one the enforcers counted in: %s", sim.Rules[0].Keys[0])
		carolReads = sim.Rules[0].TenantHash
	})

	It("top adds up every enforcer's heaviest and most refused tenants", func(ctx SpecContext) {
		out, err := kubectlSluice(ctx, "", "-n", namespace, "top", "shop")
		Expect(err).NotTo(HaveOccurred())
		expectGolden("top", out)

		out, err = kubectlSluice(ctx, "", "-n", namespace, "top", "shop", "-o", "json")
		Expect(err).NotTo(HaveOccurred())
		var top kubectlplugin.TopReport
		Expect(json.Unmarshal([]byte(out), &top)).To(Succeed(), "-o json parses: %s", out)
		Expect(top.Policy).To(Equal("shop"))
		Expect(top.Enforcers).To(ConsistOf(eps[0].Pod, eps[1].Pod))
		Expect(top.Unreachable).To(BeEmpty())
		Expect(top.Rules).To(HaveLen(1), "only carol's reads were sent: %s", out)
		reads := top.Rules[0]
		Expect(reads.Rule).To(Equal("reads"))
		Expect(reads.Heaviest).To(HaveLen(1))
		Expect(reads.Heaviest[0].Tenant).To(Equal("carol"), "carol sent 7 reads, spread over both enforcers: %s", out)
		Expect(reads.Heaviest[0].Count).To(BeEquivalentTo(7))
		Expect(reads.Refused).To(HaveLen(1))
		Expect(reads.Refused[0].Tenant).To(Equal("carol"))
		Expect(reads.Refused[0].Count).To(BeEquivalentTo(2))
	})

	It("tenant shows usage and the ban; unban and reset act and are recorded as Events", func(ctx SpecContext) {
		for range 5 { // 2 admitted, then the third refusal starts the ban
			request(eps[0], http.MethodPost, "/login", "X-Tenant-ID", "mallory")
		}
		request(eps[0], http.MethodGet, "/v1/a", "X-Tenant-ID", "mallory")
		out, err := kubectlSluice(ctx, "", "-n", namespace, "tenant", "shop", "mallory")
		Expect(err).NotTo(HaveOccurred())
		expectGolden("tenant-banned", out)

		out, err = kubectlSluice(ctx, "", "-n", namespace, "tenant", "shop", "mallory", "-o", "json")
		Expect(err).NotTo(HaveOccurred())
		var tenant kubectlplugin.TenantReport
		Expect(json.Unmarshal([]byte(out), &tenant)).To(Succeed(), "-o json parses: %s", out)
		Expect(tenant.Policy).To(Equal("shop"))
		Expect(tenant.Tenant).To(Equal("mallory"))
		Expect(tenant.Refused).To(BeTrue())
		Expect(tenant.RefusedBy).To(Equal(&debugapi.RuleRef{Policy: "shop", Rule: "login"}))
		Expect(tenant.RetryAfterSeconds).To(BeNumerically(">", 60), "the ban's hour, not the login window's minute")
		Expect(tenant.Rules).To(HaveLen(2))
		login, reads := tenant.Rules[0], tenant.Rules[1]
		Expect(login.Rule).To(Equal("login"))
		Expect(login.Limit).To(BeEquivalentTo(2))
		Expect(login.Remaining).To(BeZero())
		Expect(login.Allowed).To(BeFalse())
		Expect(login.Ban).NotTo(BeNil())
		Expect(login.Ban.Banned).To(BeTrue())
		Expect(reads.Rule).To(Equal("reads"))
		Expect(reads.Limit).To(BeEquivalentTo(5))
		Expect(reads.Remaining).To(BeEquivalentTo(4), "mallory's one read")
		Expect(reads.Allowed).To(BeTrue())

		_, err = kubectlSluice(ctx, "n\n", "-n", namespace, "unban", "shop", "mallory")
		Expect(err).To(MatchError(ContainSubstring("aborted")), "answered no")
		Expect(request(eps[1], http.MethodPost, "/login", "X-Tenant-ID", "mallory").body).To(ContainSubstring("banned"))

		out, err = kubectlSluice(ctx, "y\n", "-n", namespace, "unban", "shop", "mallory")
		Expect(err).NotTo(HaveOccurred())
		expectGolden("unban", out)
		Eventually(func() int {
			return request(eps[1], http.MethodPost, "/login", "X-Tenant-ID", "mallory").code
		}).Should(Equal(http.StatusTooManyRequests), "still over the login limit, but no longer banned")
		Expect(request(eps[0], http.MethodPost, "/login", "X-Tenant-ID", "mallory").body).NotTo(ContainSubstring("problems/banned"))

		out, err = kubectlSluice(ctx, "", "-n", namespace, "unban", "shop", "carol", "--yes", "-o", "json")
		Expect(err).NotTo(HaveOccurred())
		var action kubectlplugin.ActionReport
		Expect(json.Unmarshal([]byte(out), &action)).To(Succeed(), "-o json parses: %s", out)
		Expect(action).To(MatchFields(IgnoreExtras, Fields{"Action": Equal("unban"), "Policy": Equal("shop"),
			"Tenant": Equal("carol"), "User": Equal("sluice-admin")}))
		Expect(action.Results).To(ConsistOf(MatchFields(IgnoreExtras, Fields{"Rule": Equal("login"), "Changed": BeFalse()})),
			"carol was never banned")

		out, err = kubectlSluice(ctx, "", "-n", namespace, "reset", "shop", "mallory", "--yes")
		Expect(err).NotTo(HaveOccurred())
		expectGolden("reset", out)
		Expect(request(eps[0], http.MethodPost, "/login", "X-Tenant-ID", "mallory").code).To(Equal(http.StatusOK), "the counters are gone")

		out, err = kubectlSluice(ctx, "", "-n", namespace, "reset", "shop", "carol", "--rule", "reads", "--yes", "-o", "json")
		Expect(err).NotTo(HaveOccurred())
		action = kubectlplugin.ActionReport{}
		Expect(json.Unmarshal([]byte(out), &action)).To(Succeed(), "-o json parses: %s", out)
		Expect(action.Action).To(Equal("reset"))
		Expect(action.Results).To(Equal([]kubectlplugin.RuleOutcome{{Rule: "reads", TenantHash: carolReads, Changed: true}}),
			"reset deletes the bucket simulate --from-cluster names")
		out, err = kubectlSluice(ctx, "", "-n", namespace, "tenant", "shop", "carol", "--rule", "reads", "-o", "json")
		Expect(err).NotTo(HaveOccurred())
		tenant = kubectlplugin.TenantReport{}
		Expect(json.Unmarshal([]byte(out), &tenant)).To(Succeed(), "-o json parses: %s", out)
		Expect(tenant.Rules).To(HaveLen(1))
		Expect(tenant.Rules[0].Remaining).To(BeEquivalentTo(5), "carol's reads start afresh")

		var events corev1.EventList
		Expect(sluice.Client.List(ctx, &events, client.InNamespace(namespace))).To(Succeed())
		var recorded []string
		for _, e := range events.Items {
			if e.InvolvedObject.Name == "shop" && e.Source.Component == "kubectl-sluice" {
				recorded = append(recorded, e.Reason+": "+e.Message)
			}
		}
		Expect(recorded).To(ConsistOf(
			`TenantUnbanned: sluice-admin lifted the ban of tenant "mallory" with kubectl sluice: login (done)`,
			`TenantUnbanned: sluice-admin lifted the ban of tenant "carol" with kubectl sluice: login (no change)`,
			`TenantReset: sluice-admin deleted the counters of tenant "mallory" with kubectl sluice: login (done), reads (done)`,
			`TenantReset: sluice-admin deleted the counters of tenant "carol" with kubectl sluice: reads (done)`))
	})

	It("lists the top tenants in the policy's status when spec.status.topTenants asks", func(ctx SpecContext) {
		Expect(policy(ctx, namespace, "shop").Status.TopTenants).To(BeEmpty(), "off by default")
		editPolicy(ctx, namespace, "shop", func(p *v1alpha1.RateLimitPolicy) {
			p.Spec.Status = &v1alpha1.StatusOptions{TopTenants: true}
		})
		Eventually(func(g Gomega) {
			var reads *v1alpha1.RuleTopTenants
			for _, r := range policy(ctx, namespace, "shop").Status.TopTenants {
				if r.Rule == "reads" {
					reads = &r
				}
			}
			g.Expect(reads).NotTo(BeNil())
			g.Expect(reads.Heaviest).To(ContainElement(v1alpha1.TenantCount{Tenant: "carol", Count: 7}))
			g.Expect(reads.Refused).To(ContainElement(v1alpha1.TenantCount{Tenant: "carol", Count: 2}))
		}).Should(Succeed(), "the manager adds up both enforcers' sketches within a status interval")
	})

	It("names the permission a user lacks, in one line", func(ctx SpecContext) {
		role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "sluice-viewer"}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"sluice.dev"}, Resources: []string{"ratelimitpolicies"}, Verbs: []string{"get", "list"}},
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}},
		}}
		Expect(sluice.Client.Create(ctx, role)).To(Succeed())
		Expect(sluice.Client.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "sluice-viewer"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "sluice-viewer"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "viewer"}}})).To(Succeed())

		_, err := kubectlSluice(ctx, "", "--as", "viewer", "-n", namespace, "status")
		Expect(err).NotTo(HaveOccurred(), "viewer may read policies")
		_, err = kubectlSluice(ctx, "", "--as", "viewer", "-n", namespace, "tenant", "shop", "alice")
		Expect(err).To(MatchError("missing permission: get secrets named sluice-enforcer-admin in namespace e2e-plugin (ask for a Role that grants it)"))
		_, err = kubectlSluice(ctx, "", "--as", "nobody", "-n", namespace, "status")
		Expect(err).To(MatchError("missing permission: list ratelimitpolicies.sluice.dev in namespace e2e-plugin (ask for a Role that grants it)"))
		expectGolden("error-permission", transcript(ctx,
			[]string{"--as", "nobody", "-n", namespace, "status"},
			[]string{"--as", "viewer", "-n", namespace, "tenant", "shop", "alice"},
			[]string{"--as", "viewer", "-n", namespace, "top", "shop"},
			[]string{"--as", "viewer", "-n", namespace, "unban", "shop", "alice", "--yes"},
			[]string{"--as", "viewer", "-n", namespace, "reset", "shop", "alice", "--yes"}))
	})

	It("reads with Secret sluice-enforcer-admin and resets or unbans with sluice-enforcer-admin-write alone", func(ctx SpecContext) {
		// bind gives user a Role with what tenant, reset and unban need, and
		// get on the one admin Secret named secret.
		bind := func(user, secret string) {
			role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: user}, Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{"sluice.dev"}, Resources: []string{"ratelimitpolicies"}, Verbs: []string{"get", "list"}},
				{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}},
				{APIGroups: []string{""}, Resources: []string{"pods/portforward"}, Verbs: []string{"create"}},
				{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create"}},
				{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{secret}, Verbs: []string{"get"}},
			}}
			Expect(sluice.Client.Create(ctx, role)).To(Succeed())
			Expect(sluice.Client.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: user},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user},
				Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}})).To(Succeed())
		}
		bind("reader", "sluice-enforcer-admin")
		bind("operator", "sluice-enforcer-admin-write")
		for range 3 {
			request(eps[0], http.MethodGet, "/v1/a", "X-Tenant-ID", "trent")
		}

		out, err := kubectlSluice(ctx, "", "--as", "reader", "-n", namespace, "tenant", "shop", "trent", "--rule", "reads", "-o", "json")
		Expect(err).NotTo(HaveOccurred(), "the read token shows a tenant")
		var tenant kubectlplugin.TenantReport
		Expect(json.Unmarshal([]byte(out), &tenant)).To(Succeed(), "-o json parses: %s", out)
		Expect(tenant.Rules).To(HaveLen(1))
		Expect(tenant.Rules[0].Remaining).To(BeEquivalentTo(2))
		for _, action := range []string{"reset", "unban"} {
			_, err = kubectlSluice(ctx, "", "--as", "reader", "-n", namespace, action, "shop", "trent", "--yes")
			Expect(err).To(MatchError("missing permission: get secrets named sluice-enforcer-admin-write in namespace e2e-plugin (ask for a Role that grants it)"), action)
		}

		_, err = kubectlSluice(ctx, "", "--as", "operator", "-n", namespace, "tenant", "shop", "trent")
		Expect(err).To(MatchError(ContainSubstring("get secrets named sluice-enforcer-admin in")), "the write Secret alone does not read")
		out, err = kubectlSluice(ctx, "", "--as", "operator", "-n", namespace, "reset", "shop", "trent", "--rule", "reads", "--yes", "-o", "json")
		Expect(err).NotTo(HaveOccurred(), "reset with the write token")
		var action kubectlplugin.ActionReport
		Expect(json.Unmarshal([]byte(out), &action)).To(Succeed(), "-o json parses: %s", out)
		Expect(action.User).To(Equal("operator"))
		Expect(action.Results).To(ConsistOf(MatchFields(IgnoreExtras, Fields{"Rule": Equal("reads"), "Changed": BeTrue()})))
		_, err = kubectlSluice(ctx, "", "--as", "operator", "-n", namespace, "unban", "shop", "trent", "--yes")
		Expect(err).NotTo(HaveOccurred(), "unban with the write token")

		out, err = kubectlSluice(ctx, "", "--as", "reader", "-n", namespace, "tenant", "shop", "trent", "--rule", "reads", "-o", "json")
		Expect(err).NotTo(HaveOccurred())
		tenant = kubectlplugin.TenantReport{}
		Expect(json.Unmarshal([]byte(out), &tenant)).To(Succeed(), "-o json parses: %s", out)
		Expect(tenant.Rules[0].Remaining).To(BeEquivalentTo(5), "trent's reads start afresh")
	})
})
