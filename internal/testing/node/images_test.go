package node

import (
	"archive/tar"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

func TestArchiveImageName(t *testing.T) {
	tests := []struct {
		name, file, content, want string
	}{
		{"docker archive", "manifest.json", `[{"Config":"c.json","RepoTags":["sluice.local/node/hello:dev"],"Layers":[]}]`, "sluice.local/node/hello:dev"},
		{"OCI layout named for containerd", "index.json", `{"manifests":[{"annotations":{"io.containerd.image.name":"localhost/sluice-pause:v0.1.0","org.opencontainers.image.ref.name":"v0.1.0"}}]}`, "localhost/sluice-pause:v0.1.0"},
		{"OCI layout with a full ref.name", "index.json", `{"manifests":[{"annotations":{"org.opencontainers.image.ref.name":"localhost/app:1"}}]}`, "localhost/app:1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			path := writeTar(t, map[string]string{tt.file: tt.content})
			g.Expect(archiveImageName(path)).To(Equal(tt.want))
		})
	}
	t.Run("a tag alone names no image", func(t *testing.T) {
		path := writeTar(t, map[string]string{"index.json": `{"manifests":[{"annotations":{"org.opencontainers.image.ref.name":"v1"}}]}`})
		_, err := archiveImageName(path)
		NewWithT(t).Expect(err).To(MatchError(ContainSubstring("names no image")))
	})
}

func writeTar(t *testing.T, files map[string]string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "image.tar")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	for name, content := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(content)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}
