package node

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// tunedSysctls are the kernel settings a node changes: the kubelet sets the
// first six at start (it refuses to run with protectKernelDefaults unless
// they already hold its values), the CNI bridge plugin turns on forwarding
// for its gateway, and kube-proxy would set the last three if its
// configuration let it (the harness's does not; they are checked anyway).
var tunedSysctls = []string{
	"vm.overcommit_memory",
	"vm.panic_on_oom",
	"kernel.panic",
	"kernel.panic_on_oops",
	"kernel.keys.root_maxkeys",
	"kernel.keys.root_maxbytes",
	"net.ipv4.ip_forward",
	"net.ipv4.conf.all.route_localnet",
	"net.netfilter.nf_conntrack_max",
	"net.netfilter.nf_conntrack_tcp_timeout_established",
}

// defaultDirs are directories the kubelet, containerd or CNI write to
// whatever their configuration says: the kubelet's container log links,
// containerd's shim sockets, libcni's result cache. The harness removes
// those it finds new after a run, once they hold nothing but its own.
var defaultDirs = []string{
	"/var/log/containers",
	"/var/log/pods",
	"/var/lib/kubelet",
	"/run/containerd",
	"/var/lib/containerd",
	"/opt/containerd",
	"/var/lib/cni",
	"/run/netns",
}

// cgroupRoot is where the cgroup v1 hierarchies and the unified one are
// mounted; the kubelet makes kubepods (cgroupfs driver) in each.
const cgroupRoot = "/sys/fs/cgroup"

// HostState is what of the host a node run changes, read at one moment.
// Snapshot before Start and after Close must be equal.
type HostState struct {
	Sysctls map[string]string
	// Chains are the iptables and ip6tables chains named KUBE-*, as
	// "iptables/nat/KUBE-SERVICES".
	Chains []string
	// Tables are the nftables tables, as "ip nat": iptables-nft makes a
	// table with its built-in chains the first time anything touches it.
	Tables []string
	// Mounts are the mount points of this mount namespace.
	Mounts []string
	// Cgroups are the kubepods cgroups, one per hierarchy that has one.
	Cgroups []string
	// Dirs are the default directories that exist.
	Dirs []string
	// Links are network interfaces by name.
	Links []string
}

// Snapshot reads the host state a node run touches.
func Snapshot() (HostState, error) {
	var s HostState
	var err error
	if s.Sysctls, err = readSysctls(tunedSysctls); err != nil {
		return s, err
	}
	if s.Chains, err = kubeChains(); err != nil {
		return s, err
	}
	if s.Tables, err = nftTables(); err != nil {
		return s, err
	}
	if s.Mounts, err = mountPoints(); err != nil {
		return s, err
	}
	s.Cgroups = kubepodsCgroups()
	for _, d := range defaultDirs {
		if _, err := os.Lstat(d); err == nil {
			s.Dirs = append(s.Dirs, d)
		}
	}
	if s.Links, err = links(); err != nil {
		return s, err
	}
	return s, nil
}

// Diff describes what s has that before did not, one line per difference;
// empty when the run left nothing behind.
func (s HostState) Diff(before HostState) []string {
	var out []string
	for _, k := range sortedKeys(before.Sysctls, s.Sysctls) {
		if before.Sysctls[k] != s.Sysctls[k] {
			out = append(out, fmt.Sprintf("sysctl %s: %q, was %q", k, s.Sysctls[k], before.Sysctls[k]))
		}
	}
	// Only what appeared counts: a run removes nothing of the host's but
	// the leftovers of a stale run, and other programs on a shared host
	// unmount and delete their own things meanwhile.
	added := func(what string, was, is []string) {
		for _, x := range is {
			if !slices.Contains(was, x) {
				out = append(out, fmt.Sprintf("%s %s added", what, x))
			}
		}
	}
	added("iptables chain", before.Chains, s.Chains)
	added("nftables table", before.Tables, s.Tables)
	added("mount", before.Mounts, s.Mounts)
	added("cgroup", before.Cgroups, s.Cgroups)
	added("directory", before.Dirs, s.Dirs)
	added("network interface", before.Links, s.Links)
	return out
}

func sortedKeys(maps ...map[string]string) []string {
	var keys []string
	for _, m := range maps {
		for k := range m {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	sort.Strings(keys)
	return keys
}

func sysctlPath(name string) string {
	return filepath.Join("/proc/sys", strings.ReplaceAll(name, ".", "/"))
}

// readSysctls reads the settings this kernel has (a missing one, such as
// conntrack's before the module is in use, is left out).
func readSysctls(names []string) (map[string]string, error) {
	out := map[string]string{}
	for _, n := range names {
		data, err := os.ReadFile(sysctlPath(n))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read sysctl %s: %w", n, err)
		}
		out[n] = strings.TrimSpace(string(data))
	}
	return out, nil
}

func writeSysctl(name, value string) error {
	if err := os.WriteFile(sysctlPath(name), []byte(value), 0o644); err != nil {
		return fmt.Errorf("restore sysctl %s=%s: %w", name, value, err)
	}
	return nil
}

// iptablesTools are the front ends kube-proxy and the kubelet use; the
// legacy ones are read too, in case a binary picks that backend.
var iptablesTools = []string{"iptables", "ip6tables", "iptables-legacy", "ip6tables-legacy"}

// kubeChains lists the KUBE-* chains of every table of every front end.
func kubeChains() ([]string, error) {
	var out []string
	for _, tool := range iptablesTools {
		if !have(tool + "-save") {
			continue
		}
		data, err := exec.Command(tool + "-save").Output()
		if err != nil {
			return nil, fmt.Errorf("%s-save: %w", tool, err)
		}
		table := ""
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "*"):
				table = line[1:]
			case strings.HasPrefix(line, ":KUBE-"):
				chain, _, _ := strings.Cut(line[1:], " ")
				out = append(out, tool+"/"+table+"/"+chain)
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

// removeKubeChains deletes the rules that jump to KUBE-* chains and then
// the chains, for the chains that are not in keep.
func removeKubeChains(keep []string) error {
	chains, err := kubeChains()
	if err != nil {
		return err
	}
	var errs []string
	byTable := map[string][]string{}
	for _, c := range chains {
		if slices.Contains(keep, c) {
			continue
		}
		tool, rest, _ := strings.Cut(c, "/")
		table, chain, _ := strings.Cut(rest, "/")
		byTable[tool+"/"+table] = append(byTable[tool+"/"+table], chain)
	}
	for key, remove := range byTable {
		tool, table, _ := strings.Cut(key, "/")
		data, err := exec.Command(tool+"-save", "-t", table).Output()
		if err != nil {
			return fmt.Errorf("%s-save -t %s: %w", tool, table, err)
		}
		// Rules in any chain that jump to a chain being removed go first.
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasPrefix(line, "-A ") {
				continue
			}
			fields := ruleFields(line)
			for i := 0; i+1 < len(fields); i++ {
				if (fields[i] == "-j" || fields[i] == "-g") && slices.Contains(remove, fields[i+1]) {
					args := append([]string{"-t", table, "-D"}, fields[1:]...)
					if out, err := exec.Command(tool, args...).CombinedOutput(); err != nil {
						errs = append(errs, fmt.Sprintf("%s %s: %s", tool, strings.Join(args, " "), out))
					}
					break
				}
			}
		}
		for _, chain := range remove {
			_ = exec.Command(tool, "-t", table, "-F", chain).Run()
		}
		for _, chain := range remove {
			if out, err := exec.Command(tool, "-t", table, "-X", chain).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Sprintf("%s -t %s -X %s: %s", tool, table, chain, out))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("remove KUBE-* chains: %s", strings.Join(errs, "; "))
	}
	return nil
}

// ruleFields splits a rule as iptables-save writes it into its arguments:
// a double-quoted word (iptables-save quotes comments with spaces, with
// backslash before a quote or backslash inside) is one argument, unquoted.
func ruleFields(line string) []string {
	var out []string
	var cur strings.Builder
	inWord, quoted := false, false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quoted && c == '\\' && i+1 < len(line):
			i++
			cur.WriteByte(line[i])
		case c == '"':
			quoted, inWord = !quoted, true
		case !quoted && (c == ' ' || c == '\t'):
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out
}

// nftTables lists the nftables tables ("ip nat", "ip6 filter"); none
// without the nft command.
func nftTables() ([]string, error) {
	if !have("nft") {
		return nil, nil
	}
	out, err := exec.Command("nft", "list", "tables").Output()
	if err != nil {
		return nil, fmt.Errorf("nft list tables: %w", err)
	}
	var tables []string
	for line := range strings.SplitSeq(string(out), "\n") {
		if t, ok := strings.CutPrefix(strings.TrimSpace(line), "table "); ok {
			tables = append(tables, t)
		}
	}
	sort.Strings(tables)
	return tables, nil
}

// removeEmptyTables deletes the nftables tables that were not there
// before and hold no rule (only the built-in chains iptables-nft made).
func removeEmptyTables(before []string) error {
	tables, err := nftTables()
	if err != nil {
		return err
	}
	for _, t := range tables {
		if slices.Contains(before, t) {
			continue
		}
		out, err := exec.Command("nft", append([]string{"list", "table"}, strings.Fields(t)...)...).Output()
		if err != nil {
			return fmt.Errorf("nft list table %s: %w", t, err)
		}
		if hasRules(string(out)) {
			continue
		}
		if out, err := exec.Command("nft", append([]string{"delete", "table"}, strings.Fields(t)...)...).CombinedOutput(); err != nil {
			return fmt.Errorf("nft delete table %s: %w: %s", t, err, out)
		}
	}
	return nil
}

// hasRules reports whether nft's listing of a table holds a rule: a line
// that is no table or chain header, base chain type, or brace.
func hasRules(listing string) bool {
	for line := range strings.SplitSeq(listing, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "", line == "}", strings.HasPrefix(line, "table "), strings.HasPrefix(line, "chain "), strings.HasPrefix(line, "type "):
		default:
			return true
		}
	}
	return false
}

// mountPoints lists this mount namespace's mount points.
func mountPoints() ([]string, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out []string
	for line := range strings.SplitSeq(strings.TrimSpace(string(data)), "\n") {
		fields := strings.Fields(line)
		if len(fields) > 4 {
			out = append(out, unescapeMount(fields[4]))
		}
	}
	sort.Strings(out)
	return out, nil
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var c int
			if _, err := fmt.Sscanf(s[i+1:i+4], "%o", &c); err == nil {
				b.WriteByte(byte(c))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// kubepodsCgroups lists <hierarchy>/kubepods where it exists.
func kubepodsCgroups() []string {
	entries, err := os.ReadDir(cgroupRoot)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		p := filepath.Join(cgroupRoot, e.Name(), "kubepods")
		if info, err := os.Stat(p); err == nil && info.IsDir() {
			out = append(out, p)
		}
	}
	return out
}

func links() ([]string, error) {
	entries, err := os.ReadDir("/sys/class/net")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out, nil
}

func have(command string) bool {
	_, err := exec.LookPath(command)
	return err == nil
}
