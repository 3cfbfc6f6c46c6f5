package node

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// The images the harness builds itself, FROM scratch, one static binary
// each: the pause image when bin/images/pause.tar is missing, and the
// smoke test's application.
const (
	// PauseImage is the sandbox image built from build/pause, the program of
	// make node-images' pause archive.
	PauseImage = "sluice.local/node/pause:dev"
	// HelloImage answers HTTP on $PORT (default 8080) with its pod's name.
	HelloImage = "sluice.local/node/hello:dev"
)

// staticImage builds the main package pkg (relative to the module root)
// as a static binary and writes it as a one-layer image named ref to
// archive, with the binary as its entrypoint.
func staticImage(root, pkg, ref, archive string) error {
	bin := archive + ".bin"
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w: %s", pkg, err, out)
	}
	defer os.Remove(bin)
	data, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	entry := "/" + filepath.Base(pkg)
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	if err := tw.WriteHeader(&tar.Header{Name: entry[1:], Mode: 0o755, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	if _, err := tw.Write(data); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layer.Bytes())), nil
	})
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		return err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", runtime.GOARCH
	cfg.Config = v1.Config{Entrypoint: []string{entry}, User: "65532:65532"}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return err
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		return err
	}
	return tarball.WriteToFile(archive, tag, img)
}

// archiveImageName reads the name an image archive gives its image: a
// Docker archive's first RepoTag, or an OCI layout's
// io.containerd.image.name or full org.opencontainers.image.ref.name
// annotation, which is what ctr import names it by.
func archiveImageName(archive string) (string, error) {
	f, err := os.Open(archive)
	if err != nil {
		return "", err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("read %s: %w", archive, err)
		}
		switch strings.TrimPrefix(h.Name, "./") {
		case "manifest.json":
			var m []struct{ RepoTags []string }
			if err := json.NewDecoder(tr).Decode(&m); err != nil {
				return "", fmt.Errorf("%s manifest.json: %w", archive, err)
			}
			if len(m) > 0 && len(m[0].RepoTags) > 0 {
				return m[0].RepoTags[0], nil
			}
		case "index.json":
			var idx struct {
				Manifests []struct{ Annotations map[string]string }
			}
			if err := json.NewDecoder(tr).Decode(&idx); err != nil {
				return "", fmt.Errorf("%s index.json: %w", archive, err)
			}
			for _, m := range idx.Manifests {
				if n := m.Annotations["io.containerd.image.name"]; n != "" {
					return n, nil
				}
				if n := m.Annotations["org.opencontainers.image.ref.name"]; strings.ContainsAny(n, "/:") {
					return n, nil
				}
			}
		}
	}
	return "", fmt.Errorf("%s names no image (no RepoTags, no io.containerd.image.name)", archive)
}
