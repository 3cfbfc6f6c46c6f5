//go:build node

package node

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/internal/testing/node"
)

// buildProgram builds a package main of the module into dir.
func buildProgram(g Gomega, dir, pkg string) string {
	bin := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", bin, pkg)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	g.ExpectWithOffset(1, err).NotTo(HaveOccurred(), "go build %s:\n%s", pkg, out)
	return bin
}

// output collects a program's lines as they come.
type output struct {
	mu    sync.Mutex
	lines []string
	done  chan struct{}
}

func readLines(r io.Reader) *output {
	o := &output{done: make(chan struct{})}
	go func() {
		defer close(o.done)
		s := bufio.NewScanner(r)
		for s.Scan() {
			o.mu.Lock()
			o.lines = append(o.lines, s.Text())
			o.mu.Unlock()
		}
	}()
	return o
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return strings.Join(o.lines, "\n")
}

// line is the first line that matches re, or "".
func (o *output) line(re *regexp.Regexp) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, l := range o.lines {
		if re.MatchString(l) {
			return l
		}
	}
	return ""
}

// TestDemoNodeKeepFollowsFirstPolicy is a user of make demo-node KEEP=1:
// it runs the demo with --keep, pastes the lines it prints into a shell,
// follows docs/first-policy.md there as the document's top says for this
// node (the blocks it marks), then stops the demo with SIGTERM, as the
// banner says, and checks that the host is as it was. It runs before the
// suite's own node (TestNode) or after it: one real-node run at a time,
// the second waiting for the lock.
func TestDemoNodeKeepFollowsFirstPolicy(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the real-node suite needs root")
	}
	g := NewWithT(t)
	var err error
	root, err = filepath.Abs(root)
	g.Expect(err).NotTo(HaveOccurred())
	for _, archive := range []string{"sluice-manager.tar", "sluice-enforcer.tar", "sluice-echo.tar", "sluice-redis.tar"} {
		if _, err := os.Stat(filepath.Join(root, "bin", "images", archive)); err != nil {
			t.Skip("bin/images/" + archive + " is missing: make node-images")
		}
	}
	before, err := node.Snapshot()
	g.Expect(err).NotTo(HaveOccurred())
	tmp := t.TempDir()
	bin := buildProgram(g, tmp, "./hack/demo-node")

	start := time.Now()
	demo := exec.Command(bin, "--keep")
	demo.Dir = root
	pr, pw, err := os.Pipe()
	g.Expect(err).NotTo(HaveOccurred())
	demo.Stdout, demo.Stderr = pw, pw
	g.Expect(demo.Start()).To(Succeed())
	_ = pw.Close()
	out := readLines(pr)
	exited := make(chan error, 1)
	go func() { exited <- demo.Wait() }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = demo.Process.Signal(syscall.SIGTERM)
			select {
			case err := <-exited:
				t.Logf("the demo ended: %v", err)
			case <-time.After(time.Minute):
				_ = demo.Process.Kill()
			}
		}
		if t.Failed() {
			t.Logf("make demo-node KEEP=1 printed:\n%s", out)
		}
	})

	stopLine := regexp.MustCompile(fmt.Sprintf(`^Ctrl-C here, or kill %d \(SIGTERM\), stops it all and restores the host\.$`, demo.Process.Pid))
	g.Eventually(func() string { return out.line(stopLine) }).WithTimeout(6*time.Minute).WithPolling(time.Second).
		ShouldNot(BeEmpty(), "the demo says how to stop it once it keeps running")
	t.Logf("the demo ran and keeps the node after %s", time.Since(start).Round(time.Second))
	banner := out.String()
	g.Expect(banner).To(ContainSubstring("The demo took"), "the demo itself succeeded")
	g.Expect(banner).NotTo(ContainSubstring("demo-node failed"))
	exports := regexp.MustCompile(`(?m)^   (export \S+=.*?)(\s+#.*)?$`).FindAllStringSubmatch(banner, -1)
	g.Expect(exports).To(HaveLen(2), "KUBECONFIG and PATH")
	g.Expect(exports[0][1]).To(MatchRegexp(`^export KUBECONFIG=/\S+/kubeconfig$`))
	image := regexp.MustCompile(`hello\.yaml takes image (\S+),`).FindStringSubmatch(banner)
	g.Expect(image).To(HaveLen(2), "the demo prints the image for hello.yaml")
	g.Expect(banner).To(MatchRegexp(`(?m)^   demo/public-api\s+http://10\.96\.0\.\d+/ \(Service, ClusterIP\)$`))

	// The user's shell: helm's cache and config kept out of root's home.
	work := filepath.Join(tmp, "work")
	g.Expect(os.MkdirAll(work, 0o755)).To(Succeed())
	g.Expect(os.Symlink(filepath.Join(root, "charts"), filepath.Join(work, "charts"))).To(Succeed())
	env := append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(tmp, "helm", "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(tmp, "helm", "config"), "HELM_DATA_HOME="+filepath.Join(tmp, "helm", "data"))
	var log strings.Builder
	sh := newShell(g, &log, work, env)
	defer sh.close()
	defer func() {
		if t.Failed() {
			t.Logf("the shell:\n%s", log.String())
		}
	}()
	for _, e := range exports {
		printed, rc := sh.step(e[1])
		g.Expect(rc).To(BeZero(), "%s: %s", e[1], printed)
	}

	port := localPort(g)
	imageLine := regexp.MustCompile(`(?m)^(\s*)image: \S+`)
	marked := map[string]int{}
	adapt := func(b block) (string, bool) {
		marked[b.onDemoNode]++
		switch b.onDemoNode {
		case "skip":
			return "", false
		case "image":
			g.Expect(imageLine.MatchString(b.text)).To(BeTrue(), "the block marked for the image has one:\n%s", b.text)
			return imageLine.ReplaceAllString(b.text, "${1}image: "+image[1]), true
		}
		return onPort(b.text, port), true
	}
	docStart := time.Now()
	steps := firstPolicy(g, sh, work, adapt, func(string, string) {})
	t.Logf("docs/first-policy.md: %d steps in %s", steps, time.Since(docStart).Round(time.Second))
	g.Expect(marked["skip"]).To(Equal(1), "the document marks its helm install as done by the demo")
	g.Expect(marked["image"]).To(Equal(1), "the document marks hello.yaml's image")
	g.Expect(steps).To(BeNumerically(">=", 9))

	// Stopped as the banner says: SIGTERM to the pid it names.
	stopped = true
	g.Expect(demo.Process.Signal(syscall.SIGTERM)).To(Succeed())
	select {
	case err := <-exited:
		var exit *exec.ExitError
		g.Expect(errors.As(err, &exit)).To(BeFalse(), "the demo ends with status 0 when stopped: %v", err)
	case <-time.After(time.Minute):
		_ = demo.Process.Kill()
		t.Fatal("the demo has not stopped a minute after SIGTERM")
	}
	<-out.done
	g.Expect(out.String()).To(HaveSuffix("everything is stopped and the host restored (iptables, cgroups, mounts, sysctls, bridge)"))
	after, err := node.Snapshot()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(after.Diff(before)).To(BeEmpty(), "the host is as the demo found it")
	t.Logf("make demo-node KEEP=1 with docs/first-policy.md: %s", time.Since(start).Round(time.Second))
}
