package wsframe

// HeadMax is how much of each message's payload a Readers handler sees:
// the head where the hub writes op, seq, type and at.
const HeadMax = 200

// Handler receives what a Readers' connections read. Message gets the
// first HeadMax bytes of each text message (valid only during the call)
// and the time it was read, in Unix nanoseconds; Closed is called once
// when a connection ends after Dial returned. Both are called under the
// lock of the worker that owns the connection (worker says which, from 0
// to the Readers' worker count - 1; Message also from Dial, for what came
// with the upgrade's answer), never concurrently for one worker.
type Handler interface {
	Message(worker, id int, head []byte, now int64)
	Closed(worker, id int, err error)
}
