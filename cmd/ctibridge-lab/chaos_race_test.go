//go:build race

package main

// chaosRace: the tests run with the race detector, so the chaos test
// builds serve with it too.
const chaosRace = true
