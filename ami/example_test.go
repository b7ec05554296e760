package ami_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"

	"github.com/ctibridge/ctibridge/ami"
)

// A consumer applies each batch of events, resynchronising on LinkUp, while
// other goroutines send actions.
func ExampleClient() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	c := ami.NewClient(ami.Config{
		Addr:     "127.0.0.1:5038",
		Username: "ctibridge",
		Secret:   "secret",
		MD5:      true,
		Log:      slog.Default(),
	})
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() { <-done }()

	for {
		evs, err := c.Next(ctx)
		if err != nil {
			return // ctx ended; Run logs off and returns
		}
		for _, ev := range evs {
			switch ev.Link {
			case ami.LinkUp:
				// Resynchronise: a list action returns all its items at once.
				resp, err := c.Do(ctx, ami.NewAction("CoreShowChannels"))
				var ae *ami.ActionError
				switch {
				case errors.As(err, &ae):
					fmt.Println("refused:", ae.Message)
				case err != nil:
					fmt.Println("failed:", err)
				default:
					fmt.Println(len(resp.Items)-1, "channels")
				}
			case ami.LinkDown:
				fmt.Println("PBX link down")
			default:
				if ev.Msg.Event() == "Hangup" {
					fmt.Println("hangup", ev.Msg.Get("Channel"), ev.Msg.Get("Cause-txt"))
				}
			}
		}
	}
}
