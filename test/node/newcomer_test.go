//go:build node

package node

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/internal/testing/freeport"
)

// block is one fenced code block of a document: a shell step, a file
// (a YAML block whose first line is "# NAME.yaml") or the console output
// the step before it prints.
type block struct {
	lang, text, section string
	// onDemoNode is what make demo-node KEEP=1 does with the block, from
	// the comment right above it (<!-- make demo-node KEEP=1: skip ... -->):
	// "skip", "image" (the one the demo prints), or "" (as written).
	onDemoNode string
}

var demoNodeMarker = regexp.MustCompile(`^<!-- make demo-node KEEP=1: (\w+)`)

// docBlocks reads the fenced code blocks of a document in order, each
// with the ## heading it sits under.
func docBlocks(g Gomega, path string) []block {
	data, err := os.ReadFile(path)
	g.ExpectWithOffset(1, err).NotTo(HaveOccurred())
	var out []block
	var cur *block
	section, marker := "", ""
	for line := range strings.SplitSeq(string(data), "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case cur == nil && strings.HasPrefix(line, "## "):
			section = strings.TrimPrefix(line, "## ")
		case cur == nil && demoNodeMarker.MatchString(line):
			marker = demoNodeMarker.FindStringSubmatch(line)[1]
			g.ExpectWithOffset(1, marker).To(BeElementOf("skip", "image"), "%s: a marker this test knows", path)
			continue
		case cur == nil && strings.HasPrefix(trimmed, "```"):
			cur = &block{lang: strings.TrimPrefix(trimmed, "```"), section: section, onDemoNode: marker}
		case cur != nil && trimmed == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.text += line + "\n"
		}
		// A marker applies to the block right below it only.
		marker = ""
	}
	return out
}

// shell is a user's terminal: one bash that every step is typed into, so
// that a job started with & in one step serves the next ones.
type shell struct {
	g     Gomega
	log   io.Writer
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string
}

// newShell starts bash in dir with env; g fails the test, log gets every
// step and what it printed.
func newShell(g Gomega, log io.Writer, dir string, env []string) *shell {
	cmd := exec.Command("bash", "--norc", "--noprofile")
	cmd.Dir = dir
	cmd.Env = append(env, "PS1=", "PS2=")
	in, err := cmd.StdinPipe()
	g.Expect(err).NotTo(HaveOccurred())
	pr, pw, err := os.Pipe()
	g.Expect(err).NotTo(HaveOccurred())
	cmd.Stdout, cmd.Stderr = pw, pw
	// Its own process group, so that the jobs it started go with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	g.Expect(cmd.Start()).To(Succeed())
	_ = pw.Close()
	s := &shell{g: g, log: log, cmd: cmd, in: in, lines: make(chan string, 1024)}
	go func() {
		defer close(s.lines)
		r := bufio.NewReader(pr)
		for {
			line, err := r.ReadString('\n')
			if line != "" {
				s.lines <- line
			}
			if err != nil {
				return
			}
		}
	}()
	return s
}

const endMarker = "__sluice_step_done__"

// step types text into the shell and returns what it printed and the
// exit status of its last command; a step that has not ended within two
// minutes fails the spec.
func (s *shell) step(text string) (string, int) {
	fmt.Fprintf(s.log, "$ %s\n", strings.TrimRight(text, "\n"))
	start := time.Now()
	// On a line of its own: curl -i prints a body without a newline.
	_, err := fmt.Fprintf(s.in, "%s\nprintf '\\n%s %%d\\n' $?\n", strings.TrimRight(text, "\n"), endMarker)
	s.g.Expect(err).NotTo(HaveOccurred())
	var out strings.Builder
	deadline := time.After(2 * time.Minute)
	for {
		var line string
		select {
		case l, ok := <-s.lines:
			s.g.Expect(ok).To(BeTrue(), "the shell ended; it printed:\n%s", out.String())
			line = l
		case <-deadline:
			s.g.Expect(out.String()).To(BeEmpty(), "the step has not ended after 2 minutes; what it printed")
			s.g.Expect("the step").To(BeEmpty(), "has not ended after 2 minutes")
		}
		if rest, ok := strings.CutPrefix(line, endMarker+" "); ok {
			rc, _ := strconv.Atoi(strings.TrimSpace(rest))
			printed := strings.TrimSuffix(out.String(), "\n")
			fmt.Fprintf(s.log, "%s\n(%s, exit status %d)\n", printed, time.Since(start).Round(100*time.Millisecond), rc)
			return printed, rc
		}
		out.WriteString(line)
	}
}

// close ends the shell and every job it started.
func (s *shell) close() {
	_ = s.in.Close()
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

// localPort is 8080, the documents' port, unless something on this
// machine has it: then a free one.
func localPort(g Gomega) string {
	if l, err := net.Listen("tcp", "127.0.0.1:8080"); err == nil {
		_ = l.Close()
		return "8080"
	}
	ports, err := freeport.Loopback(1)
	g.Expect(err).NotTo(HaveOccurred())
	return strconv.Itoa(ports[0])
}

// freeValues are the parts of a document's console output that differ
// from run to run: an AGE column, seconds to wait, Unix times.
var freeValues = []*regexp.Regexp{
	regexp.MustCompile(`[0-9]+[smh]$`),
	regexp.MustCompile(`(Retry-After: |X-Ratelimit-Reset: |;t=|Retry in |"retryAfter":)[0-9]+`),
}

// matchConsole checks output against a console block of the document,
// line by line, runs of spaces and freeValues aside. A JSON body the
// document wraps for reading is joined.
func matchConsole(g Gomega, output, console string) {
	var want []string
	for line := range strings.SplitSeq(strings.TrimSpace(console), "\n") {
		if strings.HasPrefix(line, " ") && len(want) > 0 && strings.HasPrefix(want[len(want)-1], "{") {
			want[len(want)-1] += strings.TrimSpace(line)
			continue
		}
		want = append(want, line)
	}
	got := strings.Split(strings.TrimSpace(strings.ReplaceAll(output, "\r", "")), "\n")
	const free = "\x00"
	for _, w := range want {
		if strings.TrimSpace(w) == "" {
			continue
		}
		w = strings.Join(strings.Fields(w), " ")
		for _, re := range freeValues {
			w = re.ReplaceAllStringFunc(w, func(m string) string {
				return strings.TrimRight(m, "0123456789smh") + free
			})
		}
		pattern := strings.ReplaceAll(regexp.QuoteMeta(w), free, `[0-9a-z]+`)
		re := regexp.MustCompile("^" + strings.ReplaceAll(pattern, " ", `\s+`) + "$")
		found := false
		for _, g := range got {
			found = found || re.MatchString(strings.TrimSpace(g))
		}
		g.ExpectWithOffset(1, found).To(BeTrue(), "the document shows %q; the command printed:\n%s", w, output)
	}
}

// firstPolicy follows docs/first-policy.md in sh, in order: each file it
// shows written into dir as it names it, each shell step typed in, each
// console output it shows compared with what the step before printed.
// adapt rewrites a block for the machine (false: skip it); after sees each
// step and its output. It returns how many steps ran.
func firstPolicy(g Gomega, sh *shell, dir string, adapt func(b block) (string, bool), after func(text, out string)) int {
	var last string
	steps := 0
	for _, b := range docBlocks(g, filepath.Join(root, "docs", "first-policy.md")) {
		text, ok := adapt(b)
		if !ok {
			continue
		}
		switch {
		case b.lang == "yaml" && strings.HasPrefix(text, "# "):
			name := strings.TrimSpace(strings.TrimPrefix(strings.SplitN(text, "\n", 2)[0], "# "))
			g.Expect(os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644)).To(Succeed())
		case b.lang == "sh":
			g.Expect(text).NotTo(ContainSubstring("<"), "a placeholder is left in:\n%s", text)
			out, rc := sh.step(text)
			g.Expect(rc).To(BeZero(), "step %q of %q failed:\n%s", text, b.section, out)
			steps++
			last = out
			if strings.Contains(text, "curl -s -o /dev/null -w \"%{http_code}\\n\"") && strings.Contains(text, "# 200") {
				g.Expect(strings.TrimSpace(out)).To(Equal("200"), "the document says 200")
			}
			if strings.Contains(text, "jsonpath='{.status.decisions}'") {
				g.Eventually(func(g Gomega) {
					out, _ := sh.step(text)
					g.Expect(out).To(MatchRegexp(`"allowed":\s*[1-9]`))
					g.Expect(out).To(MatchRegexp(`"denied":\s*[1-9]`))
				}).WithTimeout(30 * time.Second).WithPolling(2 * time.Second).Should(Succeed())
			}
			if strings.Contains(text, "helm uninstall sluice") {
				g.Expect(out).To(ContainSubstring(`release "sluice" uninstalled`))
			}
			after(text, out)
		case b.lang == "console":
			matchConsole(g, last, b.text)
		}
	}
	return steps
}

// onPort rewrites the document's local port 8080 to port.
func onPort(text, port string) string {
	text = strings.ReplaceAll(text, "8080:80", port+":80")
	return strings.ReplaceAll(text, "127.0.0.1:8080", "127.0.0.1:"+port)
}

// A newcomer's path on the real node: docs/first-policy.md, every shell
// step typed into one shell in order, each file it shows written as it
// names it, each output it shows compared with what the command printed,
// and the checks of docs/install.md's "Check the installation" after the
// install. What this node needs differently is swapped in, as a user of
// such a node would: the images imported from make node-images instead of
// a registry (install.md's ctr import, against the node's containerd), the
// echo sample in place of nginx; and, the node running no cluster DNS,
// install.md's step for such a cluster after the install: the default
// Redis given by the in-chart Redis's ClusterIP. (demonode_test.go follows
// the same document on make demo-node KEEP=1, as its top says.)
var _ = Describe("The newcomer's path: docs/install.md and docs/first-policy.md on the real node", Ordered, func() {
	var sh *shell
	var work string

	BeforeAll(func() {
		for _, archive := range []string{"sluice-manager.tar", "sluice-enforcer.tar", "sluice-echo.tar", "sluice-redis.tar"} {
			if cluster.Images[archive] == "" {
				Skip("bin/images/" + archive + " is missing: make node-images")
			}
		}
		work = filepath.Join(cluster.Dir, "newcomer")
		Expect(os.MkdirAll(work, 0o755)).To(Succeed())
		// The user works in the checkout, where charts/sluice is.
		Expect(os.Symlink(filepath.Join(root, "charts"), filepath.Join(work, "charts"))).To(Succeed())
		Expect(os.Symlink(filepath.Join(root, "bin"), filepath.Join(work, "bin"))).To(Succeed())
		sh = newShell(Default, GinkgoWriter, work, userEnv())
		DeferCleanup(func() { sh.close() })
	})

	It("follows every step of the documents, the clean-up included, and sees what they show", func(ctx SpecContext) {
		_, tag, _ := strings.Cut(cluster.Images["sluice-manager.tar"], ":")
		_, redisTag, _ := strings.Cut(cluster.Images["sluice-redis.tar"], ":")
		echo := cluster.Images["sluice-echo.tar"]
		port := localPort(Default)

		// install.md, "Without a registry": the import into the node's
		// containerd (the harness's own socket instead of the default).
		for _, b := range docBlocks(Default, filepath.Join(root, "docs", "install.md")) {
			if b.section != "Images" || !strings.Contains(b.text, "ctr -n k8s.io images import") {
				continue
			}
			for line := range strings.SplitSeq(b.text, "\n") {
				if strings.HasPrefix(line, "sudo ctr ") {
					line = strings.Replace(line, "sudo ctr ", "ctr --address "+cluster.RuntimeSocket()+" ", 1)
					out, rc := sh.step(line)
					Expect(rc).To(BeZero(), "%s:\n%s", line, out)
					Expect(out).To(ContainSubstring("localhost/sluice-"))
				}
			}
		}
		var checks, noDNS string
		for _, b := range docBlocks(Default, filepath.Join(root, "docs", "install.md")) {
			if b.section == "Check the installation" && b.lang == "sh" {
				checks = b.text
			}
			if i := strings.Index(b.text, "helm upgrade sluice"); i >= 0 && strings.Contains(b.text, "defaultRedis.url") {
				noDNS = b.text[i:]
			}
		}
		Expect(checks).NotTo(BeEmpty(), `install.md has a "Check the installation" block`)

		nginx := regexp.MustCompile(`(?m)^(\s*)image: nginxinc/nginx-unprivileged:\S+(.*)$`)
		adapt := func(b block) (string, bool) {
			text := nginx.ReplaceAllString(b.text, "${1}image: "+echo+"${2}\n${1}imagePullPolicy: Never")
			text = strings.ReplaceAll(text, "--set images.registry=<your registry>/sluice",
				"--set images.registry=localhost --set images.pullPolicy=Never --set redis.image.repository=sluice-redis --set redis.image.tag="+redisTag)
			return onPort(text, port), true
		}
		installed := false
		after := func(text, out string) {
			if !strings.Contains(text, "helm install") {
				return
			}
			installed = true
			Expect(out).To(ContainSubstring("STATUS: deployed"))
			Expect(cluster.Images["sluice-enforcer.tar"]).To(HaveSuffix(":" + tag))
			// This node has no cluster DNS: install.md's step for
			// such a cluster gives the in-chart Redis by its ClusterIP.
			Expect(noDNS).NotTo(BeEmpty(), "install.md says what to do on a cluster without DNS")
			out, rc := sh.step(noDNS + "kubectl -n sluice-system rollout status deployment/sluice-manager --timeout=2m")
			Expect(rc).To(BeZero(), "%s", out)
			out, rc = sh.step(checks)
			Expect(rc).To(BeZero(), "install.md's checks:\n%s", out)
			Expect(out).To(MatchRegexp(`deployment.apps/sluice-manager\s+1/1`))
			Expect(out).To(ContainSubstring("ratelimitpolicies.sluice.dev"))
			Expect(out).To(ContainSubstring("KIND:"), "kubectl explain")
			lines := strings.Split(strings.TrimSpace(out), "\n")
			Expect(strings.TrimSpace(lines[len(lines)-1])).To(HaveLen(40), "the webhook has its CA")
		}
		steps := firstPolicy(Default, sh, work, adapt, after)
		Expect(installed).To(BeTrue(), "the document installs Sluice with helm")
		Expect(steps).To(BeNumerically(">=", 10), "the document's steps ran")
		Expect(kubectl(ctx, "get", "namespaces")).NotTo(MatchRegexp(`(?m)^tutorial\s+Active`), "the clean-up deleted the namespace")
	})
})
