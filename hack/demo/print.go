package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
)

func section(title string) {
	fmt.Printf("\n%s\n\n", title)
}

// table prints rows in aligned columns, indented.
func table(rows [][]string) {
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 3, ' ', 0)
	for _, r := range rows {
		fmt.Fprintf(w, "   %s\n", strings.Join(r, "\t"))
	}
	_ = w.Flush()
}

// shownHeaders are the headers an answer is shown with.
var shownHeaders = []string{"Content-Type", "Ratelimit", "Ratelimit-Policy", "Retry-After",
	"X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset"}

func showAnswer(title string, a *answer) {
	if a == nil {
		return
	}
	fmt.Printf("\n   %s (from %s):\n", title, a.pod)
	fmt.Printf("     %s\n", a.status)
	for _, h := range shownHeaders {
		if v := a.header.Values(h); len(v) > 0 {
			fmt.Printf("     %s: %s\n", h, strings.Join(v, ", "))
		}
	}
	if strings.HasPrefix(a.header.Get("Content-Type"), "application/problem+json") {
		fmt.Printf("     %s\n", a.body)
	}
}

// kubectl runs the real kubectl against the demo's API server and prints
// the command and its output.
func (d *demo) kubectl(ctx context.Context, args ...string) error {
	out, err := d.s.Kubectl(ctx, args...)
	if err != nil {
		return err
	}
	shown := slices.Clone(args)
	for i, a := range shown {
		if strings.ContainsAny(a, `[]?@" `) {
			shown[i] = "'" + a + "'"
		}
	}
	fmt.Printf("\n   $ kubectl %s\n", strings.Join(shown, " "))
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		fmt.Printf("   %s\n", line)
	}
	return nil
}
