//go:build !linux

package netns

import (
	"errors"
	"net"
)

// ErrUnavailable: network namespaces are Linux's.
var ErrUnavailable = errors.New("netns: no network namespace (Linux only)")

// NS is not available here.
type NS struct{ Name, HostIP string }

// New fails with ErrUnavailable.
func New() (*NS, error) { return nil, ErrUnavailable }

func (n *NS) Close()                                {}
func (n *NS) Dial(string, string) (net.Conn, error) { return nil, ErrUnavailable }
func (n *NS) Relay(string) (string, error)          { return "", ErrUnavailable }
func (n *NS) Through(string) (string, error)        { return "", ErrUnavailable }
func (n *NS) Down() error                           { return ErrUnavailable }
func (n *NS) Up() error                             { return ErrUnavailable }
