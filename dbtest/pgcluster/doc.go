// Package pgcluster starts a throwaway PostgreSQL cluster: initdb and
// pg_ctl from the installed binaries on a new temporary directory and a
// free loopback port, stopped and started at will (to stage an outage)
// and removed at the end. dbtest starts one for the tests when no server
// runs; loadtest's fault suite starts one in the ctibridge binary, which
// is why this package does not import testing.
//
// It never touches the machine's shared server. A Cluster's methods are
// not meant to be called concurrently with each other.
package pgcluster
