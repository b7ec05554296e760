//go:build !linux

package wsframe

import "errors"

// Readers needs epoll: on other systems NewReaders fails.
type Readers struct{}

// NewReaders fails: Readers is Linux-only.
func NewReaders(n int, h Handler) (*Readers, error) {
	return nil, errors.New("wsframe: Readers needs Linux (epoll)")
}

// NewWholeReaders fails: Readers is Linux-only.
func NewWholeReaders(n int, h Handler) (*Readers, error) {
	return NewReaders(n, h)
}

// Dial is never reached (NewReaders fails).
func (r *Readers) Dial(addr, path, token string, id int, first []byte) error {
	return errors.New("wsframe: Readers needs Linux (epoll)")
}

// Close does nothing.
func (r *Readers) Close() {}
