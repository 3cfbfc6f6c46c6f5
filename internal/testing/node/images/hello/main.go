// Command hello is the real-node suite's application: it answers every
// request on $PORT (default 8080) with "hello from <pod name>", the pod's
// name being its hostname, so that a test sees which replica answered.
package main

import (
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
)

func main() {
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "Usage: hello\n\nAnswers every request on $PORT (default 8080) with \"hello from <host name>\". It takes no flags.")
	}
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "hello takes no arguments, not %q\n", flag.Args())
		os.Exit(2)
	}
	port := os.Getenv("PORT")
	if port == "" {
		port = "8080"
	}
	host, _ := os.Hostname()
	http.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "hello from %s\n", host)
	})
	log.Fatal(http.ListenAndServe(":"+port, nil))
}
