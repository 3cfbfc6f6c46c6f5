package main

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/testing/stack"
	"github.com/sluice-dev/sluice/internal/wellknown"
)

// appLabel is the label the sample policies select their application by.
const appLabel = "app.kubernetes.io/name"

type demo struct {
	s *stack.Stack
	// apps maps an application to its two replicas' enforcers.
	apps map[string][]stack.Endpoint
	// sent counts the requests sent per policy, to wait for the status.
	sent map[string]int
}

// deploy applies the samples and creates two replicas of each application
// they select.
func (d *demo) deploy(ctx context.Context) error {
	section("1. Policies and pods")
	if err := d.s.CreateNamespace(ctx, namespace); err != nil {
		return err
	}
	samples, err := d.s.Samples()
	if err != nil {
		return err
	}
	if err := d.s.CreatePolicies(ctx, namespace, samples...); err != nil {
		return err
	}
	var names []string
	for _, p := range samples {
		names = append(names, p.Name)
	}
	fmt.Printf("   namespace %s, labelled sluice.dev/injection=enabled\n", namespace)
	fmt.Printf("   applied config/samples: %s\n", strings.Join(names, ", "))
	if err := d.waitPolicies(ctx, "the policies Accepted", func(p *v1alpha1.RateLimitPolicy) bool {
		return apimeta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.ConditionAccepted)
	}); err != nil {
		return err
	}
	fmt.Println("   the policy controller accepted them and published ConfigMap sluice-enforcer-config")

	d.apps = map[string][]stack.Endpoint{}
	d.sent = map[string]int{}
	type app struct {
		name   string
		policy string
		port   int32
		grpc   bool
	}
	var apps []app
	for _, p := range samples {
		apps = append(apps, app{p.Spec.Selector.MatchLabels[appLabel], p.Name, p.Spec.UpstreamPort,
			p.Spec.UpstreamProtocol == v1alpha1.UpstreamProtocolH2C})
	}
	slices.SortFunc(apps, func(a, b app) int { return strings.Compare(a.name, b.name) })
	for _, a := range apps {
		for i := range 2 {
			newPod := stack.AppPod
			if a.grpc {
				// An H2C upstream is the gRPC sample application.
				newPod = stack.OrdersPod
			}
			pod := newPod(namespace, fmt.Sprintf("%s-%d", a.name, i), map[string]string{appLabel: a.name}, a.port)
			if err := d.s.Client.Create(ctx, pod); err != nil {
				return err
			}
		}
	}
	fmt.Printf("   created %d pods, two replicas of each application; the webhook injected the enforcer:\n\n", 2*len(apps))
	rows := [][]string{{"POD", "POLICY", "IP", "ENFORCER"}}
	for _, a := range apps {
		eps, err := d.s.WaitReady(ctx, namespace, a.name+"-0", a.name+"-1")
		if err != nil {
			return err
		}
		d.apps[a.name] = eps
		for _, ep := range eps {
			rows = append(rows, []string{ep.Pod, a.policy, ep.IP, fmt.Sprintf("ready: %s -> app :%d", strings.TrimPrefix(ep.HTTP, "http://"), a.port)})
		}
	}
	table(rows)
	fmt.Println()
	fmt.Println("   Each enforcer is the injected container's command, args and env, run as a process:")
	fmt.Println("   its ConfigMap and labels are files, its addresses the pod's IP.")
	if err := d.waitPolicies(ctx, "every policy Ready", func(p *v1alpha1.RateLimitPolicy) bool { return ready(p) == "True" }); err != nil {
		return err
	}
	return d.kubectl(ctx, "get", "rlp", "-n", namespace, "-o", "wide")
}

// traffic drives the tenants' scenarios and shows the answers and status.
func (d *demo) traffic(ctx context.Context) error {
	section("2. Traffic through the enforcers, spread over both replicas of each app")
	scenarios := []struct {
		policy string
		scenario
	}{
		{"plans", scenario{name: "free tenant (100/h)", app: "catalog", method: http.MethodGet, path: "/v1/products/42", host: "api.example.com",
			headers: map[string]string{"X-Tenant-ID": "initech", "X-Plan": "free"}, requests: 120}},
		{"plans", scenario{name: "premium tenant (5000/h)", app: "catalog", method: http.MethodGet, path: "/v1/products/42", host: "api.example.com",
			headers: map[string]string{"X-Tenant-ID": "umbrella", "X-Plan": "premium"}, requests: 120}},
		{"public-api", scenario{name: "abusive client (60/min)", app: "public-api", method: http.MethodGet, path: "/v1/orders",
			headers: map[string]string{"X-API-Key": "sk-live-abusive"}, requests: 200}},
		{"login", scenario{name: "login brute force (5/min, ban after 10 refusals)", app: "accounts", method: http.MethodPost, path: "/login", requests: 30}},
		{"exports", scenario{name: "export burst (100/min)", app: "exports", method: http.MethodPost, path: "/v1/exports",
			headers: map[string]string{"X-Tenant-ID": "globex"}, requests: 150}},
		{"exports", scenario{name: "export burst, acme (1000/min)", app: "exports", method: http.MethodPost, path: "/v1/exports",
			headers: map[string]string{"X-Tenant-ID": "acme"}, requests: 150}},
		{"web", scenario{name: "crawler, DryRun (600/min)", app: "web", method: http.MethodGet, path: "/products",
			requests: 700}},
	}
	rows := [][]string{{"SCENARIO", "POLICY", "REQUESTS", "ALLOWED", "DENIED"}}
	var shown *tally
	for _, sc := range scenarios {
		t, err := sc.run(ctx, d.apps[sc.app])
		if err != nil {
			return err
		}
		d.sent[sc.policy] += sc.requests
		denied := fmt.Sprint(t.denied())
		if other := t.other(); other != "" {
			denied += " (" + other + ")"
		}
		rows = append(rows, []string{sc.name, sc.policy, fmt.Sprint(sc.requests), fmt.Sprint(t.allowed()), denied})
		if sc.policy == "public-api" {
			shown = t
		}
	}
	table(rows)
	fmt.Println("\n   The crawler is never refused: web runs in DryRun, and counts what it would deny.")
	fmt.Println("   The login brute force is banned for 5 minutes at its 10th refusal: the rest are BANNED below.")
	showAnswer("An allowed answer", shown.first[http.StatusOK])
	showAnswer("A refused answer", shown.first[http.StatusTooManyRequests])

	fmt.Println("\n   The status controller polls every enforcer; the policies' status adds them up:")
	if err := d.waitPolicies(ctx, "the decisions in the status", func(p *v1alpha1.RateLimitPolicy) bool {
		c := p.Status.Decisions
		return c.Allowed+c.Denied+c.Banned+c.WouldDeny >= int64(d.sent[p.Name])
	}); err != nil {
		return err
	}
	return d.kubectl(ctx, "get", "rlp", "-n", namespace, "-o", decisionColumns)
}

const decisionColumns = `custom-columns=NAME:.metadata.name,READY:.status.conditions[?(@.type=="Ready")].status,` +
	`ENFORCERS:.status.enforcers.summary,ALLOWED:.status.decisions.allowed,DENIED:.status.decisions.denied,BANNED:.status.decisions.banned,WOULD-DENY:.status.decisions.wouldDeny`

// raiseLimit edits public-api while one replica's kubelet has not yet
// refreshed its ConfigMap volume, to show the status telling so.
func (d *demo) raiseLimit(ctx context.Context) error {
	section("3. Raise public-api's limit from 60 to 120 requests a minute")
	eps := d.apps["public-api"]
	fmt.Printf("   A kubelet refreshes ConfigMap volumes on its own schedule, up to a minute or two.\n")
	fmt.Printf("   The demo holds %s's refresh back to show what the status says meanwhile.\n", eps[1].Pod)
	d.s.Kubelet.HoldConfigMaps(namespace, eps[1].Pod)
	if err := d.kubectl(ctx, "patch", "rlp", "public-api", "-n", namespace, "--type=json",
		`--patch=[{"op": "replace", "path": "/spec/rules/0/limits/0", "value": {"requests": 120, "period": "1m", "burst": 120}}]`); err != nil {
		return err
	}
	stale, err := d.waitPolicy(ctx, "public-api", "one enforcer up to date", func(p *v1alpha1.RateLimitPolicy) bool {
		return ready(p) == "False" && p.Status.Enforcers.UpToDate == 1
	})
	if err != nil {
		return err
	}
	if err := d.kubectl(ctx, "get", "rlp", "public-api", "-n", namespace, "-o", "wide"); err != nil {
		return err
	}
	fmt.Printf("   Ready: %s\n", readyMessage(stale))
	if err := d.showLimits(ctx, eps); err != nil {
		return err
	}

	fmt.Printf("\n   %s's kubelet catches up:\n", eps[1].Pod)
	d.s.Kubelet.ReleaseConfigMaps(namespace, eps[1].Pod)
	if _, err := d.waitPolicy(ctx, "public-api", "Ready to return", func(p *v1alpha1.RateLimitPolicy) bool {
		return ready(p) == "True" && p.Status.ObservedGeneration == p.Generation
	}); err != nil {
		return err
	}
	if err := d.kubectl(ctx, "get", "rlp", "public-api", "-n", namespace, "-o", "wide"); err != nil {
		return err
	}
	if err := d.showLimits(ctx, eps); err != nil {
		return err
	}
	sc := scenario{name: "new client (120/min)", app: "public-api", method: http.MethodGet, path: "/v1/orders",
		headers: map[string]string{"X-API-Key": "sk-live-newcomer"}, requests: 200}
	t, err := sc.run(ctx, eps)
	if err != nil {
		return err
	}
	fmt.Printf("\n   A new client sends %d requests: %d allowed, %d denied.\n", sc.requests, t.allowed(), t.denied())
	return nil
}

// showLimits prints the limit each replica applies now.
func (d *demo) showLimits(ctx context.Context, eps []stack.Endpoint) error {
	for _, ep := range eps {
		a, _, err := send(ctx, ep, http.MethodGet, "/v1/orders", "", map[string]string{"X-API-Key": fmt.Sprintf("probe-%d", time.Now().UnixNano())})
		if err != nil {
			return err
		}
		fmt.Printf("   %s answers X-RateLimit-Limit: %s\n", ep.Pod, a.header.Get("X-Ratelimit-Limit"))
	}
	return nil
}

// stopRedis shows the failure modes at work.
func (d *demo) stopRedis(ctx context.Context) error {
	section("4. Redis stops")
	d.s.Redis.Stop()
	fmt.Println("   redis-server is killed. Each policy does what its failureMode says:")
	fmt.Println()
	scenarios := []struct {
		mode string
		scenario
	}{
		{"Open", scenario{name: "public-api", app: "public-api", method: http.MethodGet, path: "/v1/orders",
			headers: map[string]string{"X-API-Key": "sk-live-outage"}, requests: 20}},
		{"Closed", scenario{name: "exports", app: "exports", method: http.MethodPost, path: "/v1/exports",
			headers: map[string]string{"X-Tenant-ID": "globex"}, requests: 20}},
		{"Closed", scenario{name: "login", app: "accounts", method: http.MethodPost, path: "/login", requests: 20}},
	}
	rows := [][]string{{"POLICY", "FAILURE MODE", "REQUESTS", "ANSWERS"}}
	var closed *answer
	for _, sc := range scenarios {
		t, err := sc.run(ctx, d.apps[sc.app])
		if err != nil {
			return err
		}
		var answers []string
		for _, code := range []int{200, 429, 503} {
			if n := t.byStatus[code]; n > 0 {
				answers = append(answers, fmt.Sprintf("%d × %d %s", n, code, http.StatusText(code)))
			}
		}
		rows = append(rows, []string{sc.name, sc.mode, fmt.Sprint(sc.requests), strings.Join(answers, ", ")})
		if closed == nil {
			closed = t.first[http.StatusServiceUnavailable]
		}
	}
	table(rows)
	showAnswer("A fail-closed answer", closed)

	fmt.Println("\n   The status says so:")
	// Idle enforcers notice too: they ping Redis every second.
	if err := d.waitPolicies(ctx, "the Degraded status", func(p *v1alpha1.RateLimitPolicy) bool {
		return readyReason(p) == v1alpha1.ReasonDegraded
	}); err != nil {
		return err
	}
	if err := d.kubectl(ctx, "get", "rlp", "-n", namespace, "-o", "wide"); err != nil {
		return err
	}
	for _, name := range []string{"public-api", "exports"} {
		p, err := d.s.Policy(ctx, namespace, name)
		if err != nil {
			return err
		}
		fmt.Printf("   %s: %s\n", name, readyMessage(p))
	}
	return nil
}

// startRedis brings Redis back: no enforcer restarts, limits apply again.
func (d *demo) startRedis(ctx context.Context) error {
	section("5. Redis is back")
	if err := d.s.Redis.Restart(); err != nil {
		return err
	}
	fmt.Println("   redis-server restarts (empty: it keeps nothing on disk). No enforcer restarts;")
	fmt.Println("   they reconnect and every policy is Ready again:")
	if err := d.waitPolicies(ctx, "every policy Ready", func(p *v1alpha1.RateLimitPolicy) bool { return ready(p) == "True" }); err != nil {
		return err
	}
	if err := d.kubectl(ctx, "get", "rlp", "-n", namespace, "-o", "wide"); err != nil {
		return err
	}
	sc := scenario{name: "export burst", app: "exports", method: http.MethodPost, path: "/v1/exports",
		headers: map[string]string{"X-Tenant-ID": "globex"}, requests: 150}
	t, err := sc.run(ctx, d.apps["exports"])
	if err != nil {
		return err
	}
	fmt.Printf("\n   globex's export burst again: %d requests, %d allowed, %d denied.\n", sc.requests, t.allowed(), t.denied())
	restarts := 0
	for _, pod := range d.s.Kubelet.Pods() {
		for _, sc := range pod.Sidecars {
			restarts += int(sc.Restarts)
		}
	}
	fmt.Printf("   Enforcer restarts during the demo: %d.\n", restarts)
	return nil
}

// keep leaves everything running until Ctrl-C.
func (d *demo) keep(ctx context.Context) {
	section("Everything keeps running (KEEP=1). Ctrl-C stops it all.")
	fmt.Printf("   export KUBECONFIG=%s\n", d.s.Kubeconfig)
	fmt.Printf("   kubectl get rlp,pods -n %s -o wide\n", namespace)
	fmt.Printf("   kubectl describe rlp public-api -n %s\n\n", namespace)
	rows := [][]string{{"POD", "PROXY", "ADMIN (/status /metrics /readyz)", "DEBUG (/debug/tenant)"}}
	for _, name := range slices.Sorted(maps.Keys(d.apps)) {
		for _, ep := range d.apps[name] {
			rows = append(rows, []string{ep.Pod, ep.HTTP, ep.Admin, ep.Debug})
		}
	}
	table(rows)
	ep := d.apps["public-api"][0]
	fmt.Printf("\n   curl -i -H 'X-API-Key: me' %s/v1/orders\n", ep.HTTP)
	fmt.Printf("   grpcurl -plaintext -H 'x-tenant-id: me' -d '\"book\"' %s shop.v1.Orders/Create\n",
		strings.TrimPrefix(d.apps[grpcApp][0].HTTP, "http://"))
	// /status asks for the namespace's token, which the policy controller
	// keeps in a Secret; kubectl reads it as any operator would.
	fmt.Printf("   TOKEN=$(kubectl get secret -n %s %s -o jsonpath='{.data.%s}' | base64 -d)\n",
		namespace, wellknown.AdminSecretName, wellknown.AdminTokenKey)
	fmt.Printf("   curl -s -H \"Authorization: Bearer $TOKEN\" %s/status\n", ep.Admin)
	// Why the free tenant of the traffic above is refused, from the tenant
	// and its request alone: every rule it would match, its tier, its wait.
	if catalog := d.apps["catalog"]; len(catalog) > 0 && catalog[0].Debug != "" {
		fmt.Printf("   curl -s '%s/debug/tenant?tenant=initech&header=X-Plan:free&method=GET&path=/v1/products/42&host=api.example.com'\n", catalog[0].Debug)
	}
	fmt.Printf("\n   Logs: %s (sluice-manager.log, kubelet.log, pods/*/sluice-enforcer.log)\n", d.s.Dir)
	<-ctx.Done()
	fmt.Println()
}

// waitPolicies waits until every policy of the namespace satisfies ok.
func (d *demo) waitPolicies(ctx context.Context, what string, ok func(*v1alpha1.RateLimitPolicy) bool) error {
	return waitFor(ctx, what, func() (bool, error) {
		var list v1alpha1.RateLimitPolicyList
		if err := d.s.Client.List(ctx, &list, client.InNamespace(namespace)); err != nil {
			return false, err
		}
		for i := range list.Items {
			if !ok(&list.Items[i]) {
				return false, nil
			}
		}
		return len(list.Items) > 0, nil
	})
}

// waitPolicy waits until the policy satisfies ok and returns it.
func (d *demo) waitPolicy(ctx context.Context, name, what string, ok func(*v1alpha1.RateLimitPolicy) bool) (*v1alpha1.RateLimitPolicy, error) {
	var p *v1alpha1.RateLimitPolicy
	err := waitFor(ctx, what, func() (bool, error) {
		var err error
		if p, err = d.s.Policy(ctx, namespace, name); err != nil {
			return false, err
		}
		return ok(p), nil
	})
	return p, err
}

// waitFor polls cond for up to a minute.
func waitFor(ctx context.Context, what string, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		done, err := cond()
		if err == nil && done {
			return nil
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return fmt.Errorf("waiting for %s: %w", what, err)
			}
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func ready(p *v1alpha1.RateLimitPolicy) string {
	if c := apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady); c != nil {
		return string(c.Status)
	}
	return ""
}

func readyReason(p *v1alpha1.RateLimitPolicy) string {
	if c := apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady); c != nil {
		return c.Reason
	}
	return ""
}

func readyMessage(p *v1alpha1.RateLimitPolicy) string {
	if c := apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady); c != nil {
		return fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
	}
	return "no Ready condition"
}
