package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/loadtest"
)

// `loadtest ws --epoll` against a bridge following the synthetic PBX's
// calls: every client connects and gets events, and the report says the
// epoll readers read them (not gorilla's client, a goroutine each).
func TestLoadtestWSEpoll(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a bridge")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	pbx, err := loadtest.NewSynthAMI(ctx, "127.0.0.1:0", loadtest.SynthPBX{Extensions: 40}, synthUser, synthSecret, log)
	if err != nil {
		t.Fatal(err)
	}
	defer pbx.Close()
	var out, errb bytes.Buffer
	err = withBridge(ctx, testBridgeRun, pbx.Addr(), synthUser, synthSecret, nil, func(b testBridge) error {
		calls := make(chan error, 1)
		go func() {
			_, err := loadtest.ServeSynth(ctx, loadtest.SynthServeConfig{AMI: pbx,
				SynthTraffic: loadtest.SynthTraffic{Calls: 6, Rate: 6, Ring: 200 * time.Millisecond, Duration: 3 * time.Second}})
			calls <- err
		}()
		args := []string{"ws", loadtest.WSURL(b.http), "--token", b.token, "--epoll", "-c", "30", "-d", "2500ms", "--json"}
		err := runLoadtest(ctx, args, testEnv, &out, &errb)
		if cerr := <-calls; err == nil {
			err = cerr
		}
		return err
	})
	if err != nil {
		t.Fatalf("%v\nstdout: %s\nstderr: %s", err, out.String(), errb.String())
	}
	var rep struct{ Counters map[string]int }
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if rep.Counters["clients_connected"] != 30 || rep.Counters["events"] == 0 || rep.Counters["seq_backwards"] != 0 {
		t.Errorf("counters %v, want 30 clients connected, events, no seq backwards", rep.Counters)
	}
	if rep.Counters["epoll_readers"] == 0 {
		t.Errorf("counters %v: the epoll readers did not read the clients", rep.Counters)
	}
}
