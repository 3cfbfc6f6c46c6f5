package node

import (
	"slices"
	"testing"

	. "github.com/onsi/gomega"
)

func TestDiffReportsOnlyWhatAppeared(t *testing.T) {
	before := HostState{
		Sysctls: map[string]string{"kernel.panic": "1", "vm.overcommit_memory": "0"},
		Chains:  []string{"iptables/nat/KUBE-OLD"},
		Mounts:  []string{"/", "/proc", "/var/lib/containers/storage/overlay/x/merged"},
		Dirs:    []string{"/var/lib/cni"},
	}
	tests := []struct {
		name  string
		after HostState
		want  []string
	}{
		{"unchanged", before, nil},
		{
			name: "a sysctl left changed, a chain and a mount added",
			after: HostState{
				Sysctls: map[string]string{"kernel.panic": "10", "vm.overcommit_memory": "0"},
				Chains:  []string{"iptables/nat/KUBE-OLD", "iptables/nat/KUBE-SERVICES"},
				Mounts:  []string{"/", "/proc", "/var/lib/containers/storage/overlay/x/merged", "/tmp/sluice-node-1/kubelet/root"},
				Dirs:    []string{"/var/lib/cni"},
			},
			want: []string{
				`sysctl kernel.panic: "10", was "1"`,
				"iptables chain iptables/nat/KUBE-SERVICES added",
				"mount /tmp/sluice-node-1/kubelet/root added",
			},
		},
		{
			// Another program unmounting its own, or a stale run's
			// leftovers being undone, is no change of the run's.
			name: "removed things are not the run's",
			after: HostState{
				Sysctls: before.Sysctls,
				Mounts:  []string{"/", "/proc"},
			},
			want: nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(tt.after.Diff(before)).To(Equal(tt.want))
		})
	}
}

func TestHasRules(t *testing.T) {
	tests := []struct {
		name, listing string
		want          bool
	}{
		{"built-in chains only", `table ip nat {
	chain OUTPUT {
		type nat hook output priority -100; policy accept;
	}
}
`, false},
		{"empty table", "table ip mangle {\n}\n", false},
		{"a rule", `table ip nat {
	chain POSTROUTING {
		type nat hook postrouting priority srcnat; policy accept;
		ip saddr 10.88.0.0/16 counter masquerade
	}
}
`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(hasRules(tt.listing)).To(Equal(tt.want))
		})
	}
}

func TestUnescapeMount(t *testing.T) {
	g := NewWithT(t)
	g.Expect(unescapeMount(`/mnt/with\040space`)).To(Equal("/mnt/with space"))
	g.Expect(unescapeMount("/plain")).To(Equal("/plain"))
}

// A rule with a quoted comment is deleted with the comment as one
// argument: kube-proxy's rules all carry one.
func TestRuleFieldsKeepQuotedCommentsWhole(t *testing.T) {
	for line, want := range map[string][]string{
		`-A INPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL`: {
			"-A", "INPUT", "-m", "conntrack", "--ctstate", "NEW", "-m", "comment", "--comment", "kubernetes load balancer firewall", "-j", "KUBE-PROXY-FIREWALL"},
		`-A KUBE-SERVICES -m comment --comment "say \"hi\" \\ there" -j ACCEPT`: {"-A", "KUBE-SERVICES", "-m", "comment", "--comment", `say "hi" \ there`, "-j", "ACCEPT"},
		`-A FORWARD  -j KUBE-FORWARD`:                                           {"-A", "FORWARD", "-j", "KUBE-FORWARD"},
		`-A X --comment ""`:                                                     {"-A", "X", "--comment", ""},
	} {
		if got := ruleFields(line); !slices.Equal(got, want) {
			t.Errorf("ruleFields(%s) = %q, want %q", line, got, want)
		}
	}
}
