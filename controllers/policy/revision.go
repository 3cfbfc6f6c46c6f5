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

package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/internal/compile"
)

// Publisher delivers a namespace's published configuration to its
// enforcers at once (delivery.Pusher), besides the ConfigMap the kubelet
// refreshes.
type Publisher interface {
	Publish(ctx context.Context, namespace string, document []byte, revision int64) error
	Forget(namespace string)
}

// revise gives compiled its revision: the published one when nothing else
// changed, else the next. The revision lives in the ConfigMap, so that a
// new leader continues it; the ConfigMap's resourceVersion makes two
// managers that read the same revision write one of them only. The next
// revision is at least the clock's milliseconds, so that a ConfigMap
// deleted and written again continues above the revision enforcers hold.
func revise(compiled *compile.Result, published *config.Config, now time.Time) (*compile.Result, error) {
	next := now.UnixMilli()
	if published != nil {
		same := *compiled.Config
		same.Revision = published.Revision
		if same.Hash() == published.Hash() {
			next = published.Revision
		} else {
			next = max(next, published.Revision+1)
		}
	}
	out := *compiled
	c := *compiled.Config
	c.Revision = next
	data, err := json.Marshal(&c)
	if err != nil {
		return nil, fmt.Errorf("encode the configuration of namespace %s: %w", c.Namespace, err)
	}
	out.Config, out.JSON, out.Hash = &c, data, config.HashJSON(data)
	return &out, nil
}
