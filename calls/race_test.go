//go:build race

package calls

const raceEnabled = true
