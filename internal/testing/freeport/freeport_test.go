package freeport

import (
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

func TestPortsAreFreeDistinctAndBelowTheEphemeralRange(t *testing.T) {
	ports, err := Loopback(20)
	if err != nil {
		t.Fatal(err)
	}
	_, high := candidates()
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
		if p < lowest || p >= high {
			t.Fatalf("port %d outside [%d, %d)", p, lowest, high)
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("port %d is not free: %v", p, err)
		}
		_ = l.Close()
	}
}

func TestAPortInUseIsSkipped(t *testing.T) {
	_, high := candidates()
	// Occupy most of a narrow range, then ask for ports from it.
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	busy := map[int]bool{}
	for p := lowest; p < min(lowest+200, high); p++ {
		if l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p))); err == nil {
			ls = append(ls, l)
			busy[p] = true
		}
	}
	ports, err := Loopback(50)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ports {
		if busy[p] {
			t.Fatalf("port %d has a listener and was handed out", p)
		}
	}
}

// A port one process reserved is never handed to another: the helper
// process below tries to reserve each of this one's ports, and every
// attempt must fail.
func TestProcessesNeverShareAPort(t *testing.T) {
	if ports := os.Getenv("FREEPORT_CHILD"); ports != "" {
		for _, f := range strings.Fields(ports) {
			p, _ := strconv.Atoi(f)
			if reserve(p) {
				os.Stdout.WriteString("took " + f + "\n")
			}
		}
		return
	}
	ours, err := Loopback(20)
	if err != nil {
		t.Fatal(err)
	}
	var list []string
	for _, p := range ours {
		list = append(list, strconv.Itoa(p))
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestProcessesNeverShareAPort$")
	cmd.Env = append(os.Environ(), "FREEPORT_CHILD="+strings.Join(list, " "))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v", err)
	}
	if strings.Contains(string(out), "took ") {
		t.Fatalf("another process reserved ports this one holds:\n%s", out)
	}
}
