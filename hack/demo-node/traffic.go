package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// answer is what a request got.
type answer struct {
	code         int
	proto, state string
	header       http.Header
	body         []byte
}

// get sends one request to the Service as an API key's holder, on a
// connection of its own (kube-proxy picks a pod per connection).
func get(ctx context.Context, url, apiKey string) (*answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("X-API-Key", apiKey)
	resp, err := (&http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return &answer{code: resp.StatusCode, proto: resp.Proto, state: resp.Status, header: resp.Header, body: body}, err
}

func (d *demo) lookupServiceURL(ctx context.Context) (string, error) {
	if d.serviceURL == "" {
		ip, err := d.sh(ctx, "kubectl -n demo get svc public-api -o jsonpath='{.spec.clusterIP}'")
		if err != nil {
			return "", err
		}
		d.serviceURL = "http://" + ip + "/"
	}
	return d.serviceURL, nil
}

// tally is what one API key's requests got, by answer and by the pod that
// served them (the echo application names its pod in every answer).
type tally struct {
	allowed, denied int
	allowedBy       map[string]int
	refused         *answer
}

func (t *tally) byPod() string {
	var parts []string
	for _, pod := range slices.Sorted(maps.Keys(t.allowedBy)) {
		parts = append(parts, fmt.Sprintf("%s %d", pod, t.allowedBy[pod]))
	}
	return strings.Join(parts, ", ")
}

func send(ctx context.Context, url, key string, n int) (*tally, error) {
	t := &tally{allowedBy: map[string]int{}}
	for range n {
		a, err := get(ctx, url, key)
		if err != nil {
			return nil, err
		}
		switch a.code {
		case http.StatusOK:
			t.allowed++
			var echo struct{ Pod string }
			if err := json.Unmarshal(a.body, &echo); err != nil || echo.Pod == "" {
				return nil, fmt.Errorf("GET %s: the answer names no pod: %q", url, a.body)
			}
			t.allowedBy[echo.Pod]++
		case http.StatusTooManyRequests:
			t.denied++
			t.refused = a
		default:
			return nil, fmt.Errorf("GET %s: %s", url, a.state)
		}
	}
	return t, nil
}

// waitRouted sends requests of an API key of its own until n pods have
// answered, for up to 30 s.
func (d *demo) waitRouted(ctx context.Context, url string, n int) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	pods := map[string]bool{}
	for len(pods) < n && ctx.Err() == nil {
		if t, err := send(ctx, url, "routing-check", 1); err == nil {
			for pod := range t.allowedBy {
				pods[pod] = true
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (d *demo) traffic(ctx context.Context) error {
	section("3. Traffic through the Service's ClusterIP: a new connection per request, each to the pod kube-proxy picks")
	url, err := d.lookupServiceURL(ctx)
	if err != nil {
		return err
	}
	// The second pod's endpoint reaches kube-proxy's rules a moment after
	// the rollout: wait for it, or the table would show one replica only.
	d.waitRouted(ctx, url, 2)
	abusive, err := send(ctx, url, "abusive-client", 100)
	if err != nil {
		return err
	}
	polite, err := send(ctx, url, "polite-client", 20)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 3, ' ', 0)
	fmt.Fprintln(w, "\n   API KEY\tLIMIT\tREQUESTS\tALLOWED\tDENIED\tALLOWED BY EACH POD")
	for _, row := range []struct {
		key string
		n   int
		t   *tally
	}{{"abusive-client", 100, abusive}, {"polite-client", 20, polite}} {
		fmt.Fprintf(w, "   %s\t60/min\t%d\t%d\t%d\t%s\n", row.key, row.n, row.t.allowed, row.t.denied, row.t.byPod())
	}
	_ = w.Flush()
	if a := abusive.refused; a != nil {
		fmt.Println("\n   A refused answer:")
		fmt.Printf("     %s %s\n", a.proto, a.state)
		for _, h := range []string{"Content-Type", "Ratelimit", "Ratelimit-Policy", "Retry-After", "X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset"} {
			if v := a.header.Get(h); v != "" {
				fmt.Printf("     %s: %s\n", h, v)
			}
		}
		fmt.Printf("     %s\n", bytes.TrimSpace(a.body))
	}
	// Say what this run shows, not what it should have.
	switch len(abusive.allowedBy) {
	case 2:
		fmt.Printf("\n   Both replicas served abusive-client and allowed %d of its requests between them, not 60 each:\n", abusive.allowed)
		fmt.Println("   one limit across the pods, whose enforcers count in the same Redis.")
	default:
		fmt.Printf("\n   Only %s served abusive-client: kube-proxy sent every connection to the same pod.\n", abusive.byPod())
	}
	return nil
}

func (d *demo) rollout(ctx context.Context) error {
	section("4. kubectl rollout restart under steady traffic")
	url, err := d.lookupServiceURL(ctx)
	if err != nil {
		return err
	}
	var stopped atomic.Bool
	var sent, failed atomic.Int64
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			for n := 0; !stopped.Load(); n++ {
				sent.Add(1)
				a, err := get(ctx, url, fmt.Sprintf("steady-%d-%d", i, n))
				if err != nil || a.code != http.StatusOK {
					failed.Add(1)
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	start := time.Now()
	_, err = d.sh(ctx, "kubectl -n demo rollout restart deployment/public-api && kubectl -n demo rollout status deployment/public-api --timeout=2m")
	if err == nil {
		// Traffic goes on until the old pods are gone: each drains 5 s first.
		err = d.waitPods(ctx, "demo", 2)
	}
	stopped.Store(true)
	wg.Wait()
	if err != nil {
		return err
	}
	fmt.Printf("\n   %d requests during the rollout (%s), %d failed.\n", sent.Load(), time.Since(start).Round(100*time.Millisecond), failed.Load())
	fmt.Println("   The kubelet stops a native sidecar after the application; the preStop hook the webhook gave the")
	fmt.Println("   application makes each old pod's enforcer drain first, while the pod leaves the Service.")
	_, err = d.sh(ctx, "kubectl get pods -n demo")
	return err
}

// waitPods waits until namespace ns has n pods, none of them terminating.
func (d *demo) waitPods(ctx context.Context, ns string, n int) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		var list corev1.PodList
		if err := d.cluster.Client.List(ctx, &list, client.InNamespace(ns)); err == nil && len(list.Items) == n {
			terminating := false
			for _, p := range list.Items {
				terminating = terminating || p.DeletionTimestamp != nil
			}
			if !terminating {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the old pods of namespace %s are still there: %w", ns, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}
