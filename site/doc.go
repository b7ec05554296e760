// Package site runs the PBXs one bridge follows (docs/operations.md,
// "Several PBXs"; docs/scale-out.md): each named PBX's AMI client,
// engine and link (a Site), or on the bus its node and the candidate
// that contends for its lead (a BusPBX, on bus.Contender), and the
// goroutines that merge every PBX's state into one calls.Multi (a Set).
// It also holds what a named PBX's engine and CDRs are made of: its
// users' names by its own ids (PBXConfig) and its history ids qualified
// by its name (QualifyCDRs).
//
// cmd/ctibridge builds the configurations from its settings and calls
// New, OpenBus and Set.Run; every goroutine started here is owned: it
// runs on the caller's WaitGroup with the caller's context, or (an AMI
// client that must log off last) has a lifetime of its own that the
// returned stop ends.
package site
