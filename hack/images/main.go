// Command images builds what the images need from this machine's files.
//
//	go run ./hack/images archives --out bin/images --version v0.1.0 [--prefix localhost/] [IMAGE...]
//	go run ./hack/images contexts --out bin/images/context --version v0.1.0 IMAGE...
//	go run ./hack/images list
//
// archives writes the OCI archives of the real-node tier (make node-images);
// contexts builds the binaries into build contexts for build/*.Dockerfile
// with BINARIES=prebuilt (make images, hack/images.sh).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/sluice-dev/sluice/internal/testing/images"
)

func main() {
	if len(os.Args) < 2 {
		usage(os.Stderr, 2)
	}
	switch os.Args[1] {
	case "-h", "-help", "--help", "help":
		usage(os.Stdout, 0)
	case "list", "archives", "contexts":
	default:
		fmt.Fprintf(os.Stderr, "images: unknown command %q\n", os.Args[1])
		usage(os.Stderr, 2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	out := fs.String("out", "", "output directory")
	version := fs.String("version", "", "tag of the Go images and the version their binaries print")
	prefix := fs.String("prefix", images.DefaultPrefix, "archives: registry host and path in front of each image name")
	_ = fs.Parse(os.Args[2:])
	root, err := os.Getwd()
	if err != nil {
		fail(err)
	}
	switch os.Args[1] {
	case "list":
		fmt.Println(strings.Join(images.Names(), "\n"))
	case "archives":
		need(*out, *version)
		_, err = images.Build(ctx, images.Options{Root: root, Out: *out, Version: *version, Prefix: *prefix, Only: fs.Args(), Log: os.Stdout})
	case "contexts":
		need(*out, *version)
		var dirs map[string]string
		dirs, err = images.BuildContexts(ctx, root, *out, *version, fs.Args())
		for _, name := range fs.Args() {
			if err == nil {
				rel, _ := filepath.Rel(root, dirs[name])
				fmt.Printf("%s %s\n", name, rel)
			}
		}
	}
	if err != nil {
		fail(err)
	}
}

func need(out, version string) {
	if out == "" || version == "" {
		fmt.Fprintln(os.Stderr, "images: --out and --version are required")
		os.Exit(2)
	}
}

func usage(w *os.File, code int) {
	fmt.Fprintln(w, "usage: go run ./hack/images archives|contexts|list [--out DIR] [--version V] [--prefix P] [IMAGE...]")
	os.Exit(code)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "images:", err)
	os.Exit(1)
}
