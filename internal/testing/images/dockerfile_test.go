package images

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// The archives of sluice-manager, sluice-enforcer and sluice-ratelimit hold
// what the Dockerfiles' runtime stage copies, as the user it names.
func TestRuntimeStageOfTheDockerfiles(t *testing.T) {
	for _, name := range []string{"manager", "enforcer", "ratelimit"} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			spec, err := runtimeStage(filepath.Join("..", "..", "..", "build", name+".Dockerfile"), "/ctx")
			g.Expect(err).NotTo(HaveOccurred())
			want := []File{
				{Path: "/etc/ssl/certs/ca-certificates.crt", Source: "/ctx/ca-certificates.crt"},
				{Path: "/sluice-" + name, Source: "/ctx/sluice-" + name},
			}
			if name == "enforcer" { // --policy-file runs it
				want = append(want, File{Path: "/sluice-policy-compile", Source: "/ctx/sluice-policy-compile"})
			}
			g.Expect(spec.Files).To(ConsistOf(want))
			g.Expect(spec.User).To(Equal("65532:65532"))
			g.Expect(spec.Entrypoint).To(Equal([]string{"/sluice-" + name}))
		})
	}
}

// A runtime stage this reader cannot write is refused, never half-written.
func TestRuntimeStageRefusesWhatItCannotWrite(t *testing.T) {
	const head = "ARG BASE_IMAGE=scratch\nARG BINARIES=build\nFROM golang AS build\nRUN go build \\\n  -o /out/app .\n" +
		"FROM scratch AS prebuilt\nCOPY app /out/app\nFROM ${BINARIES} AS binaries\n"
	tests := []struct {
		name, runtime, wantErr string
	}{
		{"a RUN step", "FROM ${BASE_IMAGE}\nCOPY --from=binaries /out/app /app\nRUN chmod 0700 /app\n", "has RUN"},
		{"an ENV", "FROM ${BASE_IMAGE}\nENV A=b\n", "has ENV"},
		{"a file the prebuilt stage lacks", "FROM ${BASE_IMAGE}\nCOPY --from=binaries /out/other /other\n", "does not provide"},
		{"a COPY from the context", "FROM ${BASE_IMAGE}\nCOPY app /app\n", "may only COPY --from=binaries"},
		{"another base", "FROM distroless/static\nCOPY --from=binaries /out/app /app\n", "onto scratch only"},
		{"a shell-form ENTRYPOINT", "FROM ${BASE_IMAGE}\nENTRYPOINT /app\n", "JSON array"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			file := filepath.Join(t.TempDir(), "Dockerfile")
			g.Expect(os.WriteFile(file, []byte(head+tt.runtime), 0o644)).To(Succeed())
			_, err := runtimeStage(file, "/ctx")
			g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
		})
	}
}

func TestParseLdd(t *testing.T) {
	g := NewWithT(t)
	libs, err := parseLdd([]byte(`	linux-vdso.so.1 (0x00007ffd1b5f6000)
	libssl.so.3 => /lib/x86_64-linux-gnu/libssl.so.3 (0x00007f0c5a2f0000)
	libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f0c59e00000)
	/lib64/ld-linux-x86-64.so.2 (0x00007f0c5a5b0000)
`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(libs).To(Equal([]string{"/lib/x86_64-linux-gnu/libssl.so.3", "/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2"}))

	_, err = parseLdd([]byte("\tliblzf.so.1 => not found\n"))
	g.Expect(err).To(MatchError(ContainSubstring("liblzf.so.1 => not found")))
}

// An archive's name is kept as it is by containerd only when it starts with
// a registry host: a short name would be resolved against containerd's
// default registry and never match the pod spec naming it.
func TestCheckPrefix(t *testing.T) {
	g := NewWithT(t)
	for _, ok := range []string{"localhost/", "registry.example/sluice/", "127.0.0.1:5000/"} {
		g.Expect(checkPrefix(ok)).To(Succeed(), ok)
	}
	for _, bad := range []string{"", "sluice/", "localhost", "team/sluice/"} {
		g.Expect(checkPrefix(bad)).To(MatchError(ContainSubstring("must start with a registry host")), bad)
	}
}

// The Dockerfiles' build stage compiles from a context that .dockerignore
// keeps to an allowlist: every package the binaries import must be on
// it, or a CI building the images from source fails where no test here would.
func TestDockerignoreKeepsEveryPackageTheImagesImport(t *testing.T) {
	g := NewWithT(t)
	root := filepath.Join("..", "..", "..")
	ignore, err := os.ReadFile(filepath.Join(root, ".dockerignore"))
	g.Expect(err).NotTo(HaveOccurred())
	var kept []string
	for _, line := range strings.Split(string(ignore), "\n") {
		if dir, ok := strings.CutPrefix(strings.TrimSpace(line), "!"); ok {
			kept = append(kept, strings.TrimSuffix(dir, "/"))
		}
	}
	cmd := exec.Command("go", "list", "-deps", "-f", "{{if .Module}}{{if .Module.Main}}{{.Dir}}{{end}}{{end}}", "./cmd/manager", "./cmd/enforcer", "./cmd/policy-compile", "./cmd/ratelimit")
	cmd.Dir = root
	out, err := cmd.Output()
	g.Expect(err).NotTo(HaveOccurred())
	abs, err := filepath.Abs(root)
	g.Expect(err).NotTo(HaveOccurred())
	for _, dir := range strings.Fields(string(out)) {
		rel, err := filepath.Rel(abs, dir)
		g.Expect(err).NotTo(HaveOccurred())
		rel = filepath.ToSlash(rel)
		g.Expect(kept).To(ContainElement(Satisfy(func(k string) bool {
			return rel == k || strings.HasPrefix(rel, k+"/")
		})), "%s is imported by the images but left out of the build context by .dockerignore", rel)
	}
}
