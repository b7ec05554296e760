// Package config reads a command's settings: each a flag, a CTIBRIDGE_*
// environment variable and a key of a YAML config file, all of one name,
// with the precedence flag > environment > file > default (Settings).
// Every bad setting is an *Error naming where it was given (file and
// line, variable or flag), so that check-config can report them all; a
// file's mapping keys that are not settings are read by Sections.
//
// It depends on the standard library and the YAML decoder only. A
// Settings belongs to one goroutine.
package config
