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

// Two processes asking at once never get the same port: the helper
// process below reserves ports and prints them while this one holds its own.
func TestProcessesNeverShareAPort(t *testing.T) {
	if os.Getenv("FREEPORT_CHILD") == "1" {
		ports, err := Loopback(200)
		if err != nil {
			os.Exit(2)
		}
		for _, p := range ports {
			os.Stdout.WriteString(strconv.Itoa(p) + "\n")
		}
		return
	}
	ours, err := Loopback(200)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestProcessesNeverShareAPort$")
	cmd.Env = append(os.Environ(), "FREEPORT_CHILD=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v", err)
	}
	mine := map[int]bool{}
	for _, p := range ours {
		mine[p] = true
	}
	n := 0
	for _, line := range strings.Fields(string(out)) {
		p, err := strconv.Atoi(line)
		if err != nil {
			continue
		}
		n++
		if mine[p] {
			t.Fatalf("port %d handed to both processes", p)
		}
	}
	if n != 200 {
		t.Fatalf("child printed %d ports, want 200", n)
	}
}
