//go:build race

package amievent_test

const raceEnabled = true
