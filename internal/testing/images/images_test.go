package images

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/validate"
	. "github.com/onsi/gomega"
)

// The archives the real node imports, checked as containerd will see them:
// the name, the configuration, the files, and binaries that run.
func TestBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds binaries")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server is not installed (make redis)")
	}
	g := NewWithT(t)
	ctx := context.Background()
	out := t.TempDir()
	const version = "v0.0.0-imagetest"
	opts := Options{Root: filepath.Join("..", "..", ".."), Out: out, Version: version,
		Only: []string{"sluice-enforcer", "sluice-pause", RedisName}}
	archives, err := Build(ctx, opts)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(archives).To(HaveLen(3))

	enforcer := readArchive(t, archives[0].Path)
	g.Expect(enforcer.ref).To(Equal("localhost/sluice-enforcer:" + version))
	g.Expect(enforcer.config.Config.User).To(Equal("65532:65532"))
	g.Expect(enforcer.config.Config.Entrypoint).To(Equal([]string{"/sluice-enforcer"}))
	g.Expect(enforcer.config.OS).To(Equal("linux"))
	g.Expect(enforcer.files).To(ConsistOf("etc/ssl/certs/ca-certificates.crt", "sluice-enforcer", "sluice-policy-compile"))
	ca, err := os.ReadFile(filepath.Join(enforcer.root, "etc/ssl/certs/ca-certificates.crt"))
	g.Expect(err).NotTo(HaveOccurred())
	hostCA, err := os.ReadFile(caBundle)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ca).To(Equal(hostCA), "the CA bundle is the host's")
	printed, err := exec.Command(filepath.Join(enforcer.root, "sluice-enforcer"), "--version").Output()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(printed)).To(Equal("sluice-enforcer " + version + "\n"))
	printed, err = exec.Command(filepath.Join(enforcer.root, "sluice-policy-compile"), "--version").Output()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(printed)).To(Equal("sluice-policy-compile "+version+"\n"), "--policy-file runs it, beside the enforcer")

	pause := readArchive(t, archives[1].Path)
	g.Expect(pause.ref).To(Equal("localhost/sluice-pause:" + version))
	g.Expect(pause.config.Config.Entrypoint).To(Equal([]string{"/sluice-pause"}))
	g.Expect(pause.files).To(ConsistOf("sluice-pause"))
	cmd := exec.Command(filepath.Join(pause.root, "sluice-pause"))
	g.Expect(cmd.Start()).To(Succeed())
	time.Sleep(200 * time.Millisecond) // let it install its signal handlers
	g.Expect(cmd.Process.Signal(syscall.SIGTERM)).To(Succeed())
	g.Expect(waitTimeout(cmd, 5*time.Second)).To(Succeed(), "pause exits 0 on SIGTERM")

	redis := readArchive(t, archives[2].Path)
	g.Expect(redis.ref).To(HavePrefix("localhost/sluice-redis:"))
	g.Expect(redis.config.Config.User).To(Equal("999:999"))
	g.Expect(redis.config.Config.Cmd).To(HaveExactElements("redis-server", "--protected-mode", "no", "--save", "", "--appendonly", "no"))
	g.Expect(redis.files).To(ContainElements("usr/bin/redis-server", "usr/bin/redis-cli", ContainSubstring("libc.so")))
	if os.Geteuid() == 0 {
		// Inside the image's files alone, as FROM scratch: every library
		// the binaries load is there.
		for _, bin := range []string{"redis-server", "redis-cli"} {
			printed, err := exec.Command("chroot", redis.root, "/usr/bin/"+bin, "--version").CombinedOutput()
			g.Expect(err).NotTo(HaveOccurred(), "%s", printed)
			g.Expect(string(printed)).To(ContainSubstring(strings.TrimPrefix(redis.ref, "localhost/sluice-redis:")))
		}
	}

	// Nothing changed: nothing is written again.
	before, err := os.Stat(archives[0].Path)
	g.Expect(err).NotTo(HaveOccurred())
	again, err := Build(ctx, opts)
	g.Expect(err).NotTo(HaveOccurred())
	for _, a := range again {
		g.Expect(a.Rebuilt).To(BeFalse(), a.Ref)
	}
	after, err := os.Stat(archives[0].Path)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(after.ModTime()).To(Equal(before.ModTime()))
}

// archive is what one OCI archive holds.
type archive struct {
	ref    string
	config *v1.ConfigFile
	files  []string // regular files of the layers
	root   string   // the layers extracted
}

// readArchive unpacks an OCI archive, validates every digest and size in it,
// and extracts its layers.
func readArchive(t *testing.T, file string) archive {
	t.Helper()
	g := NewWithT(t)
	dir := t.TempDir()
	g.Expect(untar(file, filepath.Join(dir, "layout"))).To(Succeed())
	idx, err := layout.ImageIndexFromPath(filepath.Join(dir, "layout"))
	g.Expect(err).NotTo(HaveOccurred())
	im, err := idx.IndexManifest()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(im.Manifests).To(HaveLen(1))
	desc := im.Manifests[0]
	g.Expect(desc.Annotations).To(HaveKeyWithValue("org.opencontainers.image.ref.name", desc.Annotations[AnnotationImageName]))
	img, err := idx.Image(desc.Digest)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(validate.Image(img)).To(Succeed())
	a := archive{ref: desc.Annotations[AnnotationImageName], root: filepath.Join(dir, "rootfs")}
	a.config, err = img.ConfigFile()
	g.Expect(err).NotTo(HaveOccurred())
	layers, err := img.Layers()
	g.Expect(err).NotTo(HaveOccurred())
	for _, l := range layers {
		rc, err := l.Uncompressed()
		g.Expect(err).NotTo(HaveOccurred())
		files, err := extract(rc, a.root)
		_ = rc.Close()
		g.Expect(err).NotTo(HaveOccurred())
		a.files = append(a.files, files...)
	}
	return a
}

func untar(file, dir string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = extract(f, dir)
	return err
}

// extract writes a tar's directories and regular files under dir and
// returns the files' names.
func extract(r io.Reader, dir string) ([]string, error) {
	var files []string
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, nil
		}
		if err != nil {
			return nil, err
		}
		target := filepath.Join(dir, filepath.FromSlash(hdr.Name))
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return nil, err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return nil, err
			}
			f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(hdr.Mode).Perm())
			if err != nil {
				return nil, err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return nil, err
			}
			files = append(files, strings.TrimPrefix(hdr.Name, "./"))
		default:
			return nil, errors.New("unexpected entry " + hdr.Name)
		}
	}
}

func waitTimeout(cmd *exec.Cmd, d time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		_ = cmd.Process.Kill()
		return errors.New("did not exit in " + d.String())
	}
}
