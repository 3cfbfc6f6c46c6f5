package images

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// caBundle is the host's CA bundle, the file the Dockerfiles' build stage
// takes from the Go image (Debian's ca-certificates, as here).
const caBundle = "/etc/ssl/certs/ca-certificates.crt"

// BuildContexts builds the named programs as the Dockerfiles' build stage
// does (static, -trimpath, the version stamped) and lays out one build
// context per program in dir: dir/NAME/NAME and its helpers' binaries, plus ca-certificates.crt for
// the images defined by a Dockerfile, whose prebuilt stage copies both.
// It returns each program's context directory.
func BuildContexts(ctx context.Context, root, dir, version string, only []string) (map[string]string, error) {
	var progs []program
	for _, p := range programs {
		if slices.Contains(only, p.name) {
			progs = append(progs, p)
		}
	}
	if len(progs) != len(only) {
		return nil, fmt.Errorf("not all of %v are Go images", only)
	}
	// One go build for all of them shares its work; the binaries stay in
	// dir/bin under the names go build gives them, so the next build finds
	// them up to date and does not link again.
	binDir := filepath.Join(dir, "bin")
	args := []string{"build", "-trimpath", "-ldflags", "-s -w -X main.version=" + version, "-o", binDir + string(filepath.Separator)}
	for _, p := range progs {
		args = append(args, p.pkg)
		for _, h := range p.helpers {
			args = append(args, h.pkg)
		}
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	contexts := map[string]string{}
	for _, p := range progs {
		c := filepath.Join(dir, p.name)
		if err := os.MkdirAll(c, 0o755); err != nil {
			return nil, err
		}
		bins := append([]helper{{name: p.name, pkg: p.pkg}}, p.helpers...)
		for _, b := range bins {
			if err := link(filepath.Join(binDir, filepath.Base(b.pkg)), filepath.Join(c, b.name)); err != nil {
				return nil, err
			}
		}
		if p.dockerfile != "" {
			if err := link(caBundle, filepath.Join(c, "ca-certificates.crt")); err != nil {
				return nil, err
			}
		}
		contexts[p.name] = c
	}
	return contexts, nil
}

// link makes dst a copy of src: a hard link when both are on one file
// system, else a copy.
func link(src, dst string) error {
	src, err := filepath.EvalSymlinks(src)
	if err != nil {
		return err
	}
	_ = os.Remove(dst)
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	st, err := os.Stat(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, data, st.Mode().Perm())
}

// redisSpec is the Redis image: Debian's redis-server and redis-cli with
// exactly the shared libraries and loader ldd finds for them, run as the
// user the chart's Redis runs as, in /data. Protected mode is off by
// default, as in the official images: nothing but the pods can reach it.
func redisSpec(ctx context.Context) (string, Spec, error) {
	server, err := exec.LookPath("redis-server")
	if err != nil {
		return "", Spec{}, errors.New("redis-server is not installed: run make redis (hack/ensure-redis.sh)")
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		return "", Spec{}, errors.New("redis-cli is not installed: run make redis (hack/ensure-redis.sh)")
	}
	out, err := exec.CommandContext(ctx, server, "--version").Output()
	if err != nil {
		return "", Spec{}, fmt.Errorf("redis-server --version: %w", err)
	}
	version := redisVersion(string(out))
	if version == "" {
		return "", Spec{}, fmt.Errorf("redis-server --version printed no v=: %q", out)
	}
	spec := Spec{
		User:       "999:999",
		WorkingDir: "/data",
		Dirs:       []Dir{{Path: "/data", UID: 999, GID: 999}},
		Cmd:        []string{"redis-server", "--protected-mode", "no", "--save", "", "--appendonly", "no"},
	}
	seen := map[string]bool{}
	for _, bin := range []string{server, cli} {
		libs, err := sharedLibraries(ctx, bin)
		if err != nil {
			return "", Spec{}, err
		}
		for _, p := range append([]string{bin}, libs...) {
			if seen[p] {
				continue
			}
			seen[p] = true
			src, err := filepath.EvalSymlinks(p)
			if err != nil {
				return "", Spec{}, err
			}
			spec.Files = append(spec.Files, File{Path: p, Source: src})
		}
	}
	return RedisName + ":" + version, spec, nil
}

// redisVersion reads 7.0.15 from "Redis server v=7.0.15 sha=...".
func redisVersion(out string) string {
	for f := range strings.FieldsSeq(out) {
		if v, ok := strings.CutPrefix(f, "v="); ok {
			return v
		}
	}
	return ""
}

// sharedLibraries lists the files ldd says bin loads: each library at the
// path it resolved, and the dynamic loader.
func sharedLibraries(ctx context.Context, bin string) ([]string, error) {
	out, err := exec.CommandContext(ctx, "ldd", bin).Output()
	if err != nil {
		return nil, fmt.Errorf("ldd %s: %w", bin, err)
	}
	return parseLdd(out)
}

// parseLdd reads ldd's lines: "libssl.so.3 => /lib/x86_64-linux-gnu/libssl.so.3
// (0x...)", "/lib64/ld-linux-x86-64.so.2 (0x...)" and the kernel's
// "linux-vdso.so.1 (0x...)", which is no file.
func parseLdd(out []byte) ([]string, error) {
	var libs []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		if strings.Contains(line, "not found") {
			return nil, fmt.Errorf("ldd: %s", line)
		}
		if _, lib, ok := strings.Cut(line, "=>"); ok {
			line = strings.TrimSpace(lib)
		}
		path, _, _ := strings.Cut(line, " ")
		if strings.HasPrefix(path, "/") {
			libs = append(libs, path)
		}
	}
	return libs, sc.Err()
}
