// Package images writes the images the real-node tier runs as OCI archives
// (bin/images/NAME.tar, for `ctr -n k8s.io images import`) from files on
// this machine only: static binaries built here, the host's CA bundle and
// Debian's redis-server. No container engine, no registry, no pull.
//
// sluice-manager, sluice-enforcer and sluice-ratelimit are read from
// build/*.Dockerfile's runtime stage, so they are the images `make images` builds with an engine.
package images

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// program is an image holding one static Go binary built from pkg.
type program struct {
	name string // image repository and binary name
	pkg  string
	// dockerfile, when set, defines the runtime image (build/*.Dockerfile);
	// otherwise the binary is the entrypoint of a scratch image run as user.
	dockerfile string
	user       string
	// helpers are further binaries of the image, beside the program's.
	helpers []helper
}

// helper is a binary an image holds beside its program's.
type helper struct{ name, pkg string }

// programs are the Go images. A sample application the real-node suite
// deploys is one more line here.
var programs = []program{
	{name: "sluice-manager", pkg: "./cmd/manager", dockerfile: "build/manager.Dockerfile"},
	{name: "sluice-enforcer", pkg: "./cmd/enforcer", dockerfile: "build/enforcer.Dockerfile",
		helpers: []helper{{name: "sluice-policy-compile", pkg: "./cmd/policy-compile"}}},
	{name: "sluice-ratelimit", pkg: "./cmd/ratelimit", dockerfile: "build/ratelimit.Dockerfile"},
	// The sandbox image of containerd's CRI (sandbox_image), uid 65535 as
	// the Kubernetes pause image.
	{name: "sluice-pause", pkg: "./build/pause", user: "65535:65535"},
	// Sample applications: HTTP echo, gRPC shop.v1.Orders, and the load
	// generator (its `upstream` command is the fixed-answer benchmark app).
	{name: "sluice-echo", pkg: "./hack/echo", user: "65532:65532"},
	{name: "sluice-orders", pkg: "./hack/orders", user: "65532:65532"},
	{name: "sluice-load", pkg: "./cmd/sluice-load", user: "65532:65532"},
}

// RedisName is the repository of the Redis image, tagged with the version
// of the host's redis-server.
const RedisName = "sluice-redis"

// Names lists every image Build writes, in order.
func Names() []string {
	names := make([]string, 0, len(programs)+1)
	for _, p := range programs {
		names = append(names, p.name)
	}
	return append(names, RedisName)
}

// DefaultPrefix names the images localhost/sluice-enforcer:v0.1.0 and so
// on; a pod spec or the chart (images.registry=localhost) names them so.
const DefaultPrefix = "localhost/"

// Options say where Build reads and writes.
type Options struct {
	// Root is the repository's root.
	Root string
	// Out is the directory of the archives (bin/images); Out/context holds
	// the binaries, one build context per program.
	Out string
	// Version is the tag of the Go images and what their --version prints.
	Version string
	// Prefix is put in front of each image's name: DefaultPrefix, or a
	// registry host and path ending in a slash.
	Prefix string
	// Only limits Build to these images; empty builds all.
	Only []string
	// Log receives one line per image.
	Log io.Writer
}

// Archive is one written image.
type Archive struct {
	// Ref is the image as a pod spec names it: localhost/sluice-enforcer:v0.1.0.
	Ref string
	// Path is the OCI archive.
	Path string
	// Spec is what the image holds.
	Spec Spec
	// Rebuilt is false when the archive was already up to date.
	Rebuilt bool
}

// Build writes the OCI archives, each only when its files or configuration
// changed since the last run.
func Build(ctx context.Context, opts Options) ([]Archive, error) {
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if opts.Version == "" {
		return nil, errors.New("images: Options.Version is empty")
	}
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if err := checkPrefix(opts.Prefix); err != nil {
		return nil, err
	}
	want := map[string]bool{}
	for _, n := range opts.Only {
		if !slices.Contains(Names(), n) {
			return nil, fmt.Errorf("no image %q: the images are %s", n, strings.Join(Names(), ", "))
		}
		want[n] = true
	}
	selected := func(n string) bool { return len(want) == 0 || want[n] }

	var progs []program
	for _, p := range programs {
		if selected(p.name) {
			progs = append(progs, p)
		}
	}
	type entry struct {
		ref  string
		spec Spec
	}
	var entries []entry
	if len(progs) > 0 {
		start := time.Now()
		contexts, err := BuildContexts(ctx, opts.Root, filepath.Join(opts.Out, "context"), opts.Version, names(progs))
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(opts.Log, "built %d binaries in %s\n", len(progs), time.Since(start).Round(100*time.Millisecond))
		for _, p := range progs {
			spec, err := programSpec(opts.Root, contexts[p.name], p)
			if err != nil {
				return nil, err
			}
			entries = append(entries, entry{opts.Prefix + p.name + ":" + opts.Version, spec})
		}
	}
	if selected(RedisName) {
		ref, spec, err := redisSpec(ctx)
		if err != nil {
			return nil, err
		}
		entries = append(entries, entry{opts.Prefix + ref, spec})
	}

	var out []Archive
	for _, e := range entries {
		a, err := writeIfChanged(opts.Out, e.ref, e.spec)
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", e.ref, err)
		}
		state := "up to date"
		if a.Rebuilt {
			state = "written"
		}
		fmt.Fprintf(opts.Log, "%-32s %s (%s)\n", e.ref, a.Path, state)
		out = append(out, a)
	}
	return out, nil
}

// programSpec is the image of one program whose binary is in contextDir.
func programSpec(root, contextDir string, p program) (Spec, error) {
	if p.dockerfile != "" {
		return runtimeStage(filepath.Join(root, p.dockerfile), contextDir)
	}
	bin := "/" + p.name
	return Spec{
		Files:      []File{{Path: bin, Source: filepath.Join(contextDir, p.name)}},
		User:       p.user,
		Entrypoint: []string{bin},
	}, nil
}

// writeIfChanged writes the archive of ref unless the one in dir was written
// from the same inputs, as its stamp file records.
func writeIfChanged(dir, ref string, spec Spec) (Archive, error) {
	name := path.Base(ref[:strings.LastIndex(ref, ":")])
	a := Archive{Ref: ref, Path: filepath.Join(dir, name+".tar"), Spec: spec}
	layer, err := layerTar(spec)
	if err != nil {
		return a, err
	}
	key := inputsKey(ref, spec, layer)
	stamp := filepath.Join(dir, ".stamps", name)
	if old, err := os.ReadFile(stamp); err == nil && string(old) == key {
		if _, err := os.Stat(a.Path); err == nil {
			return a, nil
		}
	}
	img, err := image(spec, layer)
	if err != nil {
		return a, err
	}
	if err := os.MkdirAll(filepath.Dir(stamp), 0o755); err != nil {
		return a, err
	}
	if _, err := writeArchive(a.Path, ref, img); err != nil {
		return a, err
	}
	a.Rebuilt = true
	return a, os.WriteFile(stamp, []byte(key), 0o644)
}

func names(progs []program) []string {
	n := make([]string, len(progs))
	for i, p := range progs {
		n[i] = p.name
	}
	return n
}
