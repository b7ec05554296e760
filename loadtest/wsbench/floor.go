package wsbench

import (
	"bufio"
	"context"
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"time"
)

// runFloor is the server of -floor: no hub, no engine. It upgrades each
// connection by hand, sends it a one-line snapshot, and then, at the same
// rate as runServer's changes, writes one event frame of the size of an
// extension's update to every connection in a plain loop, one write each,
// from one goroutine. That is the least a server can do to deliver a
// change to every client over loopback, measured by the same clients.
func runFloor(rate float64, burst int) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				if err := floorUpgrade(c); err != nil {
					c.Close()
					return
				}
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
			}()
		}
	}()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	fmt.Printf("ws://%s/ws floor\n", ln.Addr())
	data := `{"exten":"1000","name":"Agent Number 0","status":"busy","dnd":false,"cf":"","cfb":"","cfu":"","ip":"127.0.0.1","port":"5062","sipuseragent":"SIPp","chanType":"pjsip","context":"from-internal","conversations":{}}`
	paceChanges(ctx, rate, burst, func(i int) {
		f := serverFrame(fmt.Appendf(nil, `{"op":"event","seq":%d,"type":"extenUpdate","at":%d,"data":%s}`, i+1, time.Now().UnixMilli(), data))
		mu.Lock()
		cs := conns
		mu.Unlock()
		for _, c := range cs {
			c.Write(f)
		}
	})
	ln.Close()
	return nil
}

// floorUpgrade answers a WebSocket upgrade and sends a snapshot.
func floorUpgrade(c net.Conn) error {
	req, err := http.ReadRequest(bufio.NewReader(c))
	if err != nil {
		return err
	}
	if !strings.EqualFold(req.Header.Get("Upgrade"), "websocket") { // the parent's /memstats, /metrics
		c.Write([]byte("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"))
		return errors.New("not an upgrade")
	}
	h := sha1.Sum([]byte(req.Header.Get("Sec-WebSocket-Key") + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	resp := "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " +
		base64.StdEncoding.EncodeToString(h[:]) + "\r\n\r\n"
	_, err = c.Write(append([]byte(resp), serverFrame([]byte(`{"op":"snapshot","seq":0}`))...))
	return err
}

// serverFrame frames a text message as a server does (unmasked).
func serverFrame(p []byte) []byte {
	b := []byte{0x81}
	if n := len(p); n < 126 {
		b = append(b, byte(n))
	} else {
		b = append(b, 126, byte(n>>8), byte(n))
	}
	return append(b, p...)
}
