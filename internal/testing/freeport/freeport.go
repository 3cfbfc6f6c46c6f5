// Package freeport picks TCP ports for the processes that tests and the
// demo start (enforcers, Redis, control planes), so that a port chosen is
// still free when the process binds it.
//
// Asking the kernel for port 0 and closing the listener, the usual way,
// leaves a window: the port is in the ephemeral range, from which every
// outgoing connection takes its local port, and a busy machine (a test
// suite dialing thousands of connections) can hand it to a client socket
// before the process binds it. Ports here come from below that range, where
// no client socket is ever placed, at random; each is checked by listening
// on it, on every address asked for, and reserved for the life of this
// process with a lock file, so that test binaries running side by side
// never pick the same one.
package freeport

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Ports are chosen in [lowest, highest), and below the ephemeral range:
// under lowest are the well-known ports and those of node services (the
// kubelet's 10248-10259 among them), from highest on Kubernetes' NodePort
// range.
const (
	lowest  = 11000
	highest = 30000
)

var (
	mu   sync.Mutex
	mine = map[int]bool{} // ports this process has handed out
)

// Loopback returns n distinct ports free on 127.0.0.1.
func Loopback(n int) ([]int, error) { return On([]string{"127.0.0.1"}, n) }

// LoopbackAddrs returns n distinct 127.0.0.1:PORT addresses free now.
func LoopbackAddrs(n int) ([]string, error) {
	ports, err := Loopback(n)
	if err != nil {
		return nil, err
	}
	addrs := make([]string, n)
	for i, p := range ports {
		addrs[i] = net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
	}
	return addrs, nil
}

// On returns n distinct ports free on every one of ips.
func On(ips []string, n int) ([]int, error) {
	if len(ips) == 0 {
		return nil, errors.New("freeport: no address to check")
	}
	low, high := candidates()
	mu.Lock()
	defer mu.Unlock()
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		if tries > 20_000 {
			return nil, fmt.Errorf("freeport: no free port in %d-%d on %v", low, high, ips)
		}
		var p int
		if high > low {
			p = low + rand.IntN(high-low)
		} else {
			// No room below the ephemeral range: take the kernel's choice.
			var err error
			if p, err = kernelPort(ips[0]); err != nil {
				return nil, err
			}
		}
		if mine[p] || !free(p, ips) || !reserve(p) {
			continue
		}
		mine[p] = true
		ports = append(ports, p)
	}
	return ports, nil
}

// candidates is the range ports are drawn from: [lowest, highest), cut at
// the ephemeral range's start.
func candidates() (low, high int) {
	high = highest
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil {
				high = min(high, v)
			}
		}
	}
	return lowest, high
}

// free reports whether p can be listened on at every one of ips.
func free(p int, ips []string) bool {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	for _, ip := range ips {
		l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(p)))
		if err != nil {
			return false
		}
		ls = append(ls, l)
	}
	return true
}

// kernelPort is a port the kernel picks on ip.
func kernelPort(ip string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return 0, fmt.Errorf("freeport: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
