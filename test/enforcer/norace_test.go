//go:build !race

package enforcer

const raceEnabled = false
