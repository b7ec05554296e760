package wsframe

// HeadMax is how much of each message's payload a Readers handler sees:
// the head where the hub writes op, seq, type and at.
const HeadMax = 200

// Handler receives what a Readers' connections read. Message gets the
// first HeadMax bytes of each text message (the whole message from
// NewWholeReaders; valid only during the call) and the time it was read,
// in Unix nanoseconds; Closed is called once when a connection ends after
// Dial returned. Both are called under the lock of the worker that owns
// the connection (worker says which, from 0 to the Readers' worker count
// - 1; Message also from Dial, for what came with the upgrade's answer),
// never concurrently for one worker.
type Handler interface {
	Message(worker, id int, head []byte, now int64)
	Closed(worker, id int, err error)
}

// BinaryHandler is a Handler that is also told of binary messages (which
// ctibridge never sends), with their length, as Message is called.
type BinaryHandler interface {
	Handler
	Binary(worker, id int, n uint64)
}

// bodyKeep is the largest message buffer a connection of whole Readers
// keeps between messages; a bigger one (a snapshot split over reads) is
// let go once delivered.
const bodyKeep = 16 << 10
