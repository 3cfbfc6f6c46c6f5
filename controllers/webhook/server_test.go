/*
Copyright 2026 The Sluice Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package webhook

import (
	"context"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// serving is a webhook server that serves until its Start context ends.
type serving struct {
	webhook.Server
	stopped chan struct{}
}

func (s *serving) Start(ctx context.Context) error {
	<-ctx.Done()
	close(s.stopped)
	return nil
}

func TestTheWebhookStopsWhenTheShutdownBegins(t *testing.T) {
	inner := &serving{stopped: make(chan struct{})}
	server, signal := StoppedFirst(inner)
	if le, ok := signal.(manager.LeaderElectionRunnable); !ok || le.NeedLeaderElection() {
		t.Fatal("the signal must run without a leader, among the runnables a manager stops first")
	}

	managerCtx, stopManager := context.WithCancel(context.Background())
	defer stopManager()
	go func() { _ = server.Start(managerCtx) }() // the webhooks' group: stopped last
	signalCtx, beginShutdown := context.WithCancel(context.Background())
	go func() { _ = signal.Start(signalCtx) }() // the first group to stop

	select {
	case <-inner.stopped:
		t.Fatal("the server stopped before the shutdown began")
	case <-time.After(50 * time.Millisecond):
	}
	beginShutdown()
	select {
	case <-inner.stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("the server still serves after the shutdown began, while its group is not stopped yet")
	}
}
