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

	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// StoppedFirst is server, made to stop as soon as the manager begins to
// shut down, and the runnable to add to the manager that starts it
// stopping. controller-runtime stops a manager's webhooks last, after its
// caches: a replica being replaced would go on admitting pods, on the API
// server's kept connections, from caches that no longer follow the
// policies, and admit a pod that a policy created in that moment selects
// without the enforcer. Stopped first, its connections close (HTTP/2
// GOAWAY, in-flight reviews answered) and the API server's next call goes
// to a replica that is still running.
func StoppedFirst(server webhook.Server) (webhook.Server, manager.Runnable) {
	stop := make(chan struct{})
	return &stoppedFirst{Server: server, stop: stop}, shutdownSignal{stop: stop}
}

type stoppedFirst struct {
	webhook.Server
	stop <-chan struct{}
}

func (s *stoppedFirst) Start(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return s.Server.Start(ctx)
}

// shutdownSignal closes stop when the manager stops it: it needs no
// leader, so it is among the runnables the manager stops first.
type shutdownSignal struct{ stop chan struct{} }

func (s shutdownSignal) Start(ctx context.Context) error {
	<-ctx.Done()
	close(s.stop)
	return nil
}

func (shutdownSignal) NeedLeaderElection() bool { return false }
