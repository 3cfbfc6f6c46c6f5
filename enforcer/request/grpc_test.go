package request

import (
	"net/http"
	"testing"
)

func TestIsGRPC(t *testing.T) {
	for ct, want := range map[string]bool{
		"application/grpc": true, "application/grpc+proto": true, "application/GRPC+json": true,
		"application/grpc;charset=utf-8": true, "application/grpc-web": false, "application/grpcx": false,
		"application/json": false, "": false,
	} {
		r := &http.Request{Header: http.Header{}}
		if ct != "" {
			r.Header.Set("Content-Type", ct)
		}
		if got := IsGRPC(r); got != want {
			t.Errorf("IsGRPC(%q) = %v, want %v", ct, got, want)
		}
	}
}
