package images

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Spec is one single-layer image: its files, copied from this machine, and
// its configuration.
type Spec struct {
	Files      []File
	Dirs       []Dir
	User       string
	Entrypoint []string
	Cmd        []string
	Env        []string
	WorkingDir string
}

// File is a file of the image at Path, with the content and mode of the
// host file Source.
type File struct {
	Path, Source string
}

// Dir is an empty directory of the image, owned by UID:GID.
type Dir struct {
	Path     string
	UID, GID int
}

// defaultPath is the PATH a Dockerfile build gives a scratch image.
const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// AnnotationImageName is the annotation `ctr images import` names an
// imported image after; podman load reads org.opencontainers.image.ref.name.
const AnnotationImageName = "io.containerd.image.name"

// checkPrefix refuses a prefix that containerd would not keep as given: a
// name without a registry host is resolved against containerd's default
// registry, so an archive named "sluice-enforcer:v0.1.0" would never match
// the pod spec asking for that very name. "localhost/" is a host of its own
// that nothing is pulled from, and podman names its local builds so too.
func checkPrefix(prefix string) error {
	host, _, ok := strings.Cut(prefix, "/")
	if !ok || !strings.HasSuffix(prefix, "/") || (host != "localhost" && !strings.ContainsAny(host, ".:")) {
		return fmt.Errorf("image prefix %q must start with a registry host and end with a slash, like localhost/ or registry.example/sluice/", prefix)
	}
	return nil
}

// layerTar is the image's one layer, uncompressed: parent directories first,
// every entry owned by root unless a Dir says otherwise, and a fixed time, so
// the same files give the same bytes.
func layerTar(spec Spec) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	dirs := map[string]Dir{}
	for _, d := range spec.Dirs {
		dirs[strings.Trim(d.Path, "/")] = Dir{Path: strings.Trim(d.Path, "/"), UID: d.UID, GID: d.GID}
	}
	files := append([]File(nil), spec.Files...)
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	for _, f := range files {
		for dir := path.Dir(strings.Trim(f.Path, "/")); dir != "."; dir = path.Dir(dir) {
			if _, ok := dirs[dir]; !ok {
				dirs[dir] = Dir{Path: dir}
			}
		}
	}
	names := make([]string, 0, len(dirs))
	for name := range dirs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		d := dirs[name]
		hdr := &tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: 0o755, Uid: d.UID, Gid: d.GID, ModTime: epoch, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
	}
	for _, f := range files {
		data, err := os.ReadFile(f.Source)
		if err != nil {
			return nil, fmt.Errorf("image file %s: %w", f.Path, err)
		}
		st, err := os.Stat(f.Source)
		if err != nil {
			return nil, err
		}
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: strings.Trim(f.Path, "/"), Mode: int64(st.Mode().Perm()), Size: int64(len(data)), ModTime: epoch, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// image assembles the OCI image of spec from its layer.
func image(spec Spec, layer []byte) (v1.Image, error) {
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layer)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	if img, err = mutate.AppendLayers(img, l); err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	env := spec.Env
	if len(env) == 0 {
		env = []string{defaultPath}
	}
	cf.Config = v1.Config{User: spec.User, Entrypoint: spec.Entrypoint, Cmd: spec.Cmd, Env: env, WorkingDir: spec.WorkingDir}
	return mutate.ConfigFile(img, cf)
}

// inputsKey is what an archive is rebuilt on: the layer's bytes, the
// configuration and the name.
func inputsKey(ref string, spec Spec, layer []byte) string {
	h := sha256.New()
	cfg, _ := json.Marshal(struct {
		Ref                  string
		User, WorkingDir     string
		Entrypoint, Cmd, Env []string
		Arch                 string
	}{ref, spec.User, spec.WorkingDir, spec.Entrypoint, spec.Cmd, spec.Env, runtime.GOARCH})
	h.Write(cfg)
	h.Write(layer)
	return hex.EncodeToString(h.Sum(nil))
}

// writeArchive writes img as an OCI image layout in one tar file at dest
// (the format `ctr images import`, `podman load` and `docker load` read),
// named ref in both annotations runtimes look at. It writes a temporary file
// and renames it, so a reader never sees half an archive.
func writeArchive(dest, ref string, img v1.Image) (v1.Hash, error) {
	digest, err := img.Digest()
	if err != nil {
		return v1.Hash{}, err
	}
	manifest, err := img.RawManifest()
	if err != nil {
		return v1.Hash{}, err
	}
	config, err := img.RawConfigFile()
	if err != nil {
		return v1.Hash{}, err
	}
	configName, err := img.ConfigName()
	if err != nil {
		return v1.Hash{}, err
	}
	index, err := json.Marshal(v1.IndexManifest{
		SchemaVersion: 2,
		MediaType:     types.OCIImageIndex,
		Manifests: []v1.Descriptor{{
			MediaType: types.OCIManifestSchema1, Digest: digest, Size: int64(len(manifest)),
			Annotations: map[string]string{AnnotationImageName: ref, "org.opencontainers.image.ref.name": ref},
			Platform:    &v1.Platform{OS: "linux", Architecture: runtime.GOARCH},
		}},
	})
	if err != nil {
		return v1.Hash{}, err
	}

	tmp, err := os.CreateTemp(filepath.Dir(dest), "."+filepath.Base(dest)+".*")
	if err != nil {
		return v1.Hash{}, err
	}
	defer os.Remove(tmp.Name())
	tw := tar.NewWriter(tmp)
	add := func(name string, data []byte) error {
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(data)), ModTime: time.Unix(0, 0)}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	blob := func(h v1.Hash) string { return "blobs/" + h.Algorithm + "/" + h.Hex }
	entries := []struct {
		name string
		data []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", index},
		{blob(digest), manifest},
		{blob(configName), config},
	}
	for _, e := range entries {
		if err := add(e.name, e.data); err != nil {
			return v1.Hash{}, err
		}
	}
	layers, err := img.Layers()
	if err != nil {
		return v1.Hash{}, err
	}
	for _, l := range layers {
		h, err := l.Digest()
		if err != nil {
			return v1.Hash{}, err
		}
		rc, err := l.Compressed()
		if err != nil {
			return v1.Hash{}, err
		}
		data, err := io.ReadAll(rc)
		_ = rc.Close()
		if err != nil {
			return v1.Hash{}, err
		}
		if err := add(blob(h), data); err != nil {
			return v1.Hash{}, err
		}
	}
	if err := tw.Close(); err != nil {
		return v1.Hash{}, err
	}
	if err := tmp.Close(); err != nil {
		return v1.Hash{}, err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return v1.Hash{}, err
	}
	return digest, os.Rename(tmp.Name(), dest)
}
