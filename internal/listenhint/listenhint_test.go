package listenhint

import (
	"errors"
	"net"
	"strings"
	"testing"
)

func TestExplainNamesTheFlagOfTheListenerHeld(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	addr := held.Addr().String()
	_, lerr := net.Listen("tcp", addr)
	if lerr == nil {
		t.Fatal("a held port was bound twice")
	}
	ls := []Listener{{Name: "gRPC", Addr: "127.0.0.1:1", Flag: "listen"}, {Name: "HTTP", Addr: addr, Flag: "http-listen", Env: []string{"HOST", "PORT"}}}
	got := Explain(lerr, ls...)
	if !errors.Is(got, lerr) {
		t.Errorf("the bind error is lost: %v", got)
	}
	for _, want := range []string{"HTTP listener", "--http-listen (or HOST, PORT)", addr} {
		if !strings.Contains(got.Error(), want) {
			t.Errorf("%q does not say %q", got, want)
		}
	}
	other := errors.New("not a listener")
	if got := Explain(other, ls...); got.Error() != other.Error() {
		t.Errorf("an error that is no bind failure was changed: %v", got)
	}
}
