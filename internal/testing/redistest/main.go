package redistest

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
)

// RunWithServer is a TestMain body for packages whose tests share one
// standalone server: it starts the server, hands it to use, runs the tests
// and stops the server, returning the exit code for os.Exit. go-redis'
// own logging is silenced, since fault tests make it report every failed
// dial.
func RunWithServer(m *testing.M, use func(*Server)) int {
	redis.SetLogger(quietLogger{})
	s, err := New()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer s.Close()
	use(s)
	return m.Run()
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}
