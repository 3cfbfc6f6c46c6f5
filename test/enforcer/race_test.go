//go:build race

package enforcer

// raceEnabled builds the binary under test with the race detector too when
// the tests run with it.
const raceEnabled = true
