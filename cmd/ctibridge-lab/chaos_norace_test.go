//go:build !race

package main

const chaosRace = false
