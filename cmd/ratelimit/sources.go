package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/reload"
	"github.com/sluice-dev/sluice/enforcer/rls/erlconfig"
)

// errWaiting is a --policy-config file that is not there yet while it is
// the only source: the operator has not written its ConfigMap (the volume
// is optional, its folder exists). The service starts, not ready, and
// loads the file when it appears.
var errWaiting = errors.New("waiting for the policy configuration")

// sources are the two configurations the service serves side by side:
// envoyproxy/ratelimit's folder (--config-dir) and the operator's compiled
// RateLimitPolicies (--policy-config). The reloader sees one configuration,
// their merge; the service decides each part in its own namespace.
type sources struct {
	configDir, policyConfig string
	erlOpts                 erlconfig.LoadOptions

	mu sync.Mutex
	// read is the last reading, which the reloader applies next (it reads
	// and applies one at a time).
	read parts
	// served is the reading in service.
	served parts
	// policySeen: the policy file was put into service once; from then
	// on its removal is an error that keeps the last good configuration,
	// as the enforcer keeps its own when its ConfigMap is deleted.
	policySeen bool
}

// parts are one reading of the sources: each part nil when absent.
type parts struct {
	merged, erl, policies *config.Config
	// policyHash is the hash of the whole --policy-config file, which the
	// operator compares with the hash it wrote.
	policyHash string
}

func newSources(o *options) *sources {
	return &sources{configDir: o.configDir, policyConfig: o.admin.policyConfig,
		erlOpts: erlconfig.LoadOptions{Options: erlconfig.Options{Namespace: o.namespace, MergeDomains: o.mergeDomains,
			FailureMode: config.FailureMode(o.failureMode), Timeout: o.redisTimeout}, IgnoreDotFiles: o.ignoreDotFiles}}
}

// source is what the reloader reads and watches: the policy file (its
// folder, so a ConfigMap's symlink swap is seen) and the ERL folder.
func (s *sources) source() *reload.Source {
	src := &reload.Source{Load: s.load}
	if s.policyConfig != "" {
		src.Files = []string{s.policyConfig, s.policyConfig + config.CompressedSuffix} // either is the file (config.Load)
	}
	if s.configDir != "" {
		src.Dirs = []string{s.configDir}
	}
	return src
}

// load reads both sources and merges them; a domain both define is
// refused, naming both.
func (s *sources) load() (*config.Config, error) {
	var p parts
	var err error
	if s.configDir != "" {
		if p.erl, err = erlconfig.LoadDir(s.configDir, s.erlOpts); err != nil {
			return nil, err
		}
	}
	if s.policyConfig != "" {
		if p.policies, p.policyHash, err = s.loadPolicies(p.erl == nil); err != nil {
			return nil, err
		}
	}
	if err := s.conflicts(&p); err != nil {
		return nil, err
	}
	p.merged = merge(p.erl, p.policies)
	s.mu.Lock()
	s.read = p
	s.mu.Unlock()
	return p.merged, nil
}

// loadPolicies reads --policy-config and keeps its policies with a domain
// (a file that is also an enforcer's configuration has others, which are
// the proxy's). A file that is not there yet, in a folder that is, counts
// as no policy; alone, it is errWaiting.
func (s *sources) loadPolicies(alone bool) (*config.Config, string, error) {
	cfg, err := config.Load(s.policyConfig)
	if errors.Is(err, fs.ErrNotExist) && dirExists(filepath.Dir(s.policyConfig)) {
		s.mu.Lock()
		seen := s.policySeen
		s.mu.Unlock()
		switch {
		case seen:
			return nil, "", fmt.Errorf("--policy-config %s was removed; the last good configuration stays in service: %w", s.policyConfig, err)
		case alone:
			return nil, "", fmt.Errorf("%w: %w", errWaiting, err)
		}
		return nil, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("--policy-config: %w", err)
	}
	hash := cfg.Hash()
	kept := *cfg
	kept.Policies = []config.Policy{}
	for _, p := range cfg.Policies {
		if p.Domain == "" {
			continue
		}
		kept.Policies = append(kept.Policies, p)
	}
	return &kept, hash, nil
}

// conflicts refuses a domain that both an ERL file and a policy define, or
// a policy name both use (/status and the metrics name policies).
func (s *sources) conflicts(p *parts) error {
	if p.erl == nil || p.policies == nil {
		return nil
	}
	domains, names := map[string]bool{}, map[string]string{}
	for _, e := range p.erl.Policies {
		domains[e.Domain], names[e.Name] = true, e.Domain
	}
	var errs []error
	for _, pol := range p.policies.Policies {
		switch {
		case domains[pol.Domain]:
			errs = append(errs, fmt.Errorf("domain %q is defined both by %s and by policy %s/%s of --policy-config %s: remove it from one",
				pol.Domain, s.erlFileOf(pol.Domain), p.policies.Namespace, pol.Name, s.policyConfig))
		case names[pol.Name] != "":
			errs = append(errs, fmt.Errorf("policy %s/%s of --policy-config %s has the name of the policy of domain %q of %s: rename one",
				p.policies.Namespace, pol.Name, s.policyConfig, names[pol.Name], s.erlFileOf(names[pol.Name])))
		}
	}
	return errors.Join(errs...)
}

// erlFileOf names the ERL file (or files) defining domain, else the folder.
func (s *sources) erlFileOf(domain string) string {
	paths, _ := erlconfig.Files(s.configDir, s.erlOpts.IgnoreDotFiles)
	var found []string
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		if f, err := erlconfig.Parse(path, data); err == nil && f.Domain == domain {
			found = append(found, path)
		}
	}
	switch len(found) {
	case 0:
		return "the envoyproxy/ratelimit folder " + s.configDir
	case 1:
		return "envoyproxy/ratelimit file " + found[0]
	}
	return fmt.Sprintf("envoyproxy/ratelimit files %v", found)
}

// merge is the one configuration the reloader sees: every policy of both,
// in the policies' namespace when there are any.
func merge(erlCfg, policies *config.Config) *config.Config {
	out := &config.Config{Schema: config.Schema, Policies: []config.Policy{}}
	for _, c := range []*config.Config{erlCfg, policies} {
		if c != nil {
			out.Namespace = c.Namespace
			out.Policies = append(out.Policies, c.Policies...)
		}
	}
	return out
}

// take is the reading whose merge is cfg, for applying it.
func (s *sources) take(cfg *config.Config) (parts, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.read.merged != cfg {
		return parts{}, errors.New("internal error: the configuration to apply is not the last one read")
	}
	return s.read, nil
}

// serve records p as the reading in service.
func (s *sources) serve(p parts) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.served = p
	s.policySeen = s.policySeen || p.policies != nil
}

// configs are the parts of p to decide with.
func (p parts) configs() []*config.Config {
	var out []*config.Config
	for _, c := range []*config.Config{p.erl, p.policies} {
		if c != nil {
			out = append(out, c)
		}
	}
	return out
}

// reloads is the reloader's state as /status reports it: the hash is the
// --policy-config file's once it is in service (what the operator wrote
// and compares), and while waiting for it the state says so.
type reloads struct {
	r   *reload.Reloader
	src *sources
}

func (rl reloads) State() reload.State {
	st := rl.r.State()
	rl.src.mu.Lock()
	hash := rl.src.served.policyHash
	rl.src.mu.Unlock()
	if hash != "" {
		st.Hash = hash
	}
	if st.Config == nil && st.LastError == "" {
		st.LastError = fmt.Sprintf("%v: %s is not there yet", errWaiting, rl.src.policyConfig)
	}
	return st
}

func dirExists(dir string) bool {
	info, err := os.Stat(dir)
	return err == nil && info.IsDir()
}
