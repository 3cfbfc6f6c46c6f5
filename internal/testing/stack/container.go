package stack

import (
	"fmt"
	"net"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// podLocalFlags are the enforcer flags whose addresses mean "this pod": in
// a pod, 0.0.0.0 and 127.0.0.1 are the pod's own network namespace; on one
// machine they become the pod's loopback IP. Other addresses (Redis) are
// outside the pod and stay as they are.
var podLocalFlags = []string{"listen", "admin-listen", "debug-listen", "upstream"}

// valueSource reads the objects that env valueFrom names.
type valueSource interface {
	// SecretKey is the value of key in Secret name of the pod's namespace;
	// found is false when the Secret or the key does not exist.
	SecretKey(name, key string) (value string, found bool, err error)
	ConfigMapKey(name, key string) (value string, found bool, err error)
}

// command is how one container of a pod runs as a local process.
type command struct {
	Path string
	Args []string
	Env  []string
}

// containerCommand resolves c, a container of pod, into the process the
// kubelet would run: the image's binary (bin) with the container's command
// and args, the environment with every valueFrom resolved and $(VAR)
// references expanded, volume mount paths replaced by the local directories
// in mounts (volume name -> directory), and pod-local addresses bound to ip.
func containerCommand(pod *corev1.Pod, c *corev1.Container, bin, ip string, mounts map[string]string, values valueSource) (*command, error) {
	env, err := containerEnv(pod, c, ip, values)
	if err != nil {
		return nil, err
	}
	lookup := envLookup(env)
	paths := mountPaths(c, mounts)
	cmd := &command{Path: bin}
	// The image's entrypoint is the binary: a command replaces it, and its
	// first word names the binary, which is the one built for the image.
	argv := slices.Clone(c.Command)
	if len(argv) > 0 {
		argv = argv[1:]
	}
	argv = append(argv, c.Args...)
	for _, a := range argv {
		cmd.Args = append(cmd.Args, bindPodLocal(paths.replace(expandVars(a, lookup)), ip))
	}
	for _, e := range env {
		v := paths.replace(e.Value)
		if flag, ok := strings.CutPrefix(e.Name, "SLUICE_"); ok && slices.Contains(podLocalFlags, strings.ReplaceAll(strings.ToLower(flag), "_", "-")) {
			v = bindAddress(v, ip)
		}
		cmd.Env = append(cmd.Env, e.Name+"="+v)
	}
	return cmd, nil
}

// containerEnv resolves the container's env in order, as the kubelet does:
// a value may refer to variables defined before it.
func containerEnv(pod *corev1.Pod, c *corev1.Container, ip string, values valueSource) ([]corev1.EnvVar, error) {
	var env []corev1.EnvVar
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			env = append(env, corev1.EnvVar{Name: e.Name, Value: expandVars(e.Value, envLookup(env))})
			continue
		}
		v, ok, err := resolveValueFrom(pod, e.ValueFrom, ip, values)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		if ok {
			env = append(env, corev1.EnvVar{Name: e.Name, Value: v})
		}
	}
	return env, nil
}

// envLookup finds a variable in env; a later definition wins.
func envLookup(env []corev1.EnvVar) func(string) (string, bool) {
	return func(name string) (string, bool) {
		for i := len(env) - 1; i >= 0; i-- {
			if env[i].Name == name {
				return env[i].Value, true
			}
		}
		return "", false
	}
}

// resolveValueFrom is the value of one env valueFrom; ok is false for an
// optional reference to a missing object or key, which leaves the variable
// unset.
func resolveValueFrom(pod *corev1.Pod, from *corev1.EnvVarSource, ip string, values valueSource) (string, bool, error) {
	switch {
	case from.FieldRef != nil:
		v, err := podField(pod, from.FieldRef.FieldPath, ip)
		return v, err == nil, err
	case from.SecretKeyRef != nil:
		ref := from.SecretKeyRef
		v, found, err := values.SecretKey(ref.Name, ref.Key)
		if err != nil {
			return "", false, err
		}
		if !found && (ref.Optional == nil || !*ref.Optional) {
			return "", false, fmt.Errorf("secret %s has no key %s (CreateContainerConfigError)", ref.Name, ref.Key)
		}
		return v, found, nil
	case from.ConfigMapKeyRef != nil:
		ref := from.ConfigMapKeyRef
		v, found, err := values.ConfigMapKey(ref.Name, ref.Key)
		if err != nil {
			return "", false, err
		}
		if !found && (ref.Optional == nil || !*ref.Optional) {
			return "", false, fmt.Errorf("configmap %s has no key %s (CreateContainerConfigError)", ref.Name, ref.Key)
		}
		return v, found, nil
	}
	return "", false, nil // resourceFieldRef: no limits apply to a local process
}

// podField is the value of a downward API field path.
func podField(pod *corev1.Pod, path, ip string) (string, error) {
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP", "status.podIPs":
		return ip, nil
	case "status.hostIP", "status.hostIPs":
		return "127.0.0.1", nil
	}
	for prefix, m := range map[string]map[string]string{"metadata.labels": pod.Labels, "metadata.annotations": pod.Annotations} {
		if key, ok := strings.CutPrefix(path, prefix+"['"); ok {
			return m[strings.TrimSuffix(key, "']")], nil
		}
	}
	return "", fmt.Errorf("field path %q is not supported", path)
}

// expandVars expands $(NAME) references to defined variables; $$ is a
// literal $, and references to undefined variables stay as they are.
func expandVars(s string, lookup func(string) (string, bool)) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
			continue
		case '(':
			if end := strings.IndexByte(s[i+2:], ')'); end >= 0 {
				name := s[i+2 : i+2+end]
				if v, ok := lookup(name); ok {
					b.WriteString(v)
				} else {
					b.WriteString(s[i : i+3+end])
				}
				i += 2 + end
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// bindPodLocal binds the address of a pod-local flag (--listen=0.0.0.0:15080,
// --upstream=http://127.0.0.1:8080) to the pod's IP.
func bindPodLocal(arg, ip string) string {
	name, value, ok := strings.Cut(strings.TrimLeft(arg, "-"), "=")
	if !ok || !strings.HasPrefix(arg, "-") || !slices.Contains(podLocalFlags, name) {
		return arg
	}
	return arg[:len(arg)-len(value)] + bindAddress(value, ip)
}

// bindAddress replaces the host of a pod-local address or URL with ip.
func bindAddress(value, ip string) string {
	scheme, hostport, isURL := strings.Cut(value, "://")
	if !isURL {
		hostport, scheme = value, ""
	}
	rest := ""
	if i := strings.IndexByte(hostport, '/'); i >= 0 {
		hostport, rest = hostport[:i], hostport[i:]
	}
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return value
	}
	switch host {
	case "", "0.0.0.0", "::", "127.0.0.1", "::1", "localhost":
		host = ip
	}
	out := net.JoinHostPort(host, port) + rest
	if isURL {
		out = scheme + "://" + out
	}
	return out
}

// mountMap maps the container's mount paths to local directories.
type mountMap [][2]string

func mountPaths(c *corev1.Container, mounts map[string]string) mountMap {
	var m mountMap
	for _, vm := range c.VolumeMounts {
		if dir, ok := mounts[vm.Name]; ok {
			m = append(m, [2]string{strings.TrimSuffix(vm.MountPath, "/"), dir})
		}
	}
	// Longest first, so /etc/sluice/config wins over /etc/sluice.
	slices.SortFunc(m, func(a, b [2]string) int { return len(b[0]) - len(a[0]) })
	return m
}

// replace rewrites the mount paths in s to their local directories.
func (m mountMap) replace(s string) string {
	for _, p := range m {
		for i := strings.Index(s, p[0]); i >= 0; {
			end := i + len(p[0])
			if end == len(s) || s[end] == '/' {
				s = s[:i] + p[1] + s[end:]
				end = i + len(p[1])
			}
			next := strings.Index(s[end:], p[0])
			if next < 0 {
				break
			}
			i = end + next
		}
	}
	return s
}
