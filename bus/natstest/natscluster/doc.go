// Package natscluster starts real nats-server processes with JetStream:
// one server, or a cluster of three with routes on loopback, each storing
// in a directory of its own under the one it is given, each on free
// loopback ports. natstest starts them for the tests (and kills them when
// the test ends); loadtest's failover scenario starts a cluster in the
// ctibridge binary, which is why this package does not import testing.
//
// It never uses a server it did not start.
package natscluster
