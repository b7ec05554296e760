package ws_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"golang.org/x/crypto/bcrypt"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
	"github.com/ctibridge/ctibridge/ws"
)

// A hub serves an engine's state on GET /ws; a client subscribes and gets
// a snapshot, then events.
func ExampleHub() {
	hash, _ := bcrypt.GenerateFromPassword([]byte("secret"), bcrypt.MinCost)
	users, _ := auth.NewUsers([]auth.User{{Username: "alice", PasswordHash: string(hash), Endpoints: []string{"201"}}})
	svc := auth.NewService(users, auth.Config{})
	eng := calls.New(calls.Config{Names: map[string]string{"201": "Alice"}})
	eng.Publish()

	hub, _ := ws.NewHub(eng, svc, ws.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	go hub.Run(ctx)
	mux := http.NewServeMux()
	mux.Handle("GET /ws", hub)
	srv := httptest.NewServer(mux)
	defer func() { srv.Close(); cancel(); hub.Close() }()

	token, _, _ := svc.Tokens().Issue("alice")
	c, err := ws.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/ws", token)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	hello, _ := c.Next(ctx)
	fmt.Println(hello.Op, hello.Version)
	c.Subscribe("extensions")
	snap, _ := c.Next(ctx)
	fmt.Println(snap.Op, snap.Seq, string(snap.Extensions[:30]))

	// The engine's goroutine (package link in ctibridge serve) applies
	// AMI events and publishes; the hub fans the changes out.
	eng.Apply(ami.NewMessage([]ami.Header{{Key: "Event", Value: "DeviceStateChange"}, {Key: "Device", Value: "PJSIP/201"}, {Key: "State", Value: "INUSE"}}...))
	eng.Publish()
	ev, _ := c.Next(ctx)
	fmt.Println(ev.Op, ev.Seq, ev.Type, string(ev.Data[:44]))
	// Output:
	// hello 1
	// snapshot 1 {"201":{"exten":"201","name":"
	// event 2 extenUpdate {"exten":"201","name":"Alice","status":"busy
}
