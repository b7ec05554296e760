package pbxsim

import (
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ivahaev/amigo"
)

// TestAmigoOriginate: a third-party AMI client (github.com/ivahaev/amigo,
// which writes headers in random map order) logs in to pbxsim, receives
// events and gets an answer to each of 20 Originates, sync and async
// alike; only the async ones are followed by OriginateResponse, and a
// failed one carries Uniqueid <null>, as manager.c does.
func TestAmigoOriginate(t *testing.T) {
	p := startPBX(t, Config{})
	startPhone(t, p, PhoneConfig{Exten: "201"})
	host, port, _ := net.SplitHostPort(p.AMIAddr())
	a := amigo.New(&amigo.Settings{Username: DefaultAMIUser, Password: DefaultAMISecret, Host: host, Port: port,
		ActionTimeout: 20 * time.Second, ReconnectInterval: time.Hour})
	var mu sync.Mutex
	events := map[string]int{}
	var responses []map[string]string
	a.RegisterDefaultHandler(func(m map[string]string) {
		mu.Lock()
		defer mu.Unlock()
		events[m["Event"]]++
		if m["Event"] == "OriginateResponse" {
			responses = append(responses, m)
		}
	})
	a.Connect()
	deadline := time.Now().Add(10 * time.Second)
	for !a.Connected() {
		if time.Now().After(deadline) {
			t.Fatal("amigo did not log in")
		}
		time.Sleep(20 * time.Millisecond)
	}

	answered := 0
	for i := range 20 {
		act := map[string]string{"Action": "Originate", "Channel": "PJSIP/201", "Context": "from-internal",
			"Exten": "601", "Priority": "1", "CallerID": "201", "ActionID": "o-" + strconv.Itoa(i)}
		if i%2 == 0 {
			act["Async"] = "true"
		}
		r, err := a.Action(act)
		if err != nil || r["Response"] != "Success" || r["Message"] != "Originate successfully queued" {
			t.Errorf("originate %d: %v %v", i, r, err)
			continue
		}
		answered++
	}
	if answered != 20 {
		t.Fatalf("%d Originate answers of 20", answered)
	}
	// A failed one: sync answers the error, async reports <null>.
	if r, _ := a.Action(map[string]string{"Action": "Originate", "Channel": "PJSIP/299", "Exten": "601", "Context": "from-internal"}); r["Response"] != "Error" || r["Message"] != "Originate failed" {
		t.Errorf("sync originate to an unregistered phone: %v", r)
	}
	if r, _ := a.Action(map[string]string{"Action": "Originate", "Channel": "PJSIP/299", "Exten": "601", "Context": "from-internal", "Async": "yes", "ActionID": "fail"}); r["Response"] != "Success" {
		t.Errorf("async originate to an unregistered phone: %v", r)
	}
	deadline = time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(responses)
		mu.Unlock()
		if n >= 11 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d OriginateResponse events, want 11 (10 async successes, 1 failure)", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // no more may come
	mu.Lock()
	defer mu.Unlock()
	if len(responses) != 11 {
		t.Errorf("%d OriginateResponse events, want 11: a synchronous Originate emits none", len(responses))
	}
	fails := 0
	for _, r := range responses {
		if r["Response"] == "Failure" {
			fails++
			if r["Uniqueid"] != "<null>" || r["Channel"] != "PJSIP/299" || r["ActionID"] != "fail" {
				t.Errorf("failure %v, want Uniqueid <null>, Channel PJSIP/299", r)
			}
		} else if r["Uniqueid"] == "<null>" || r["Exten"] != "601" {
			t.Errorf("success %v", r)
		}
	}
	if fails != 1 || events["Newchannel"] < 20 || events["DialEnd"] < 20 {
		t.Errorf("failures %d, events %v", fails, events)
	}
}

// TestOriginateBadArguments: manager.c's answers to a malformed Originate.
func TestOriginateBadArguments(t *testing.T) {
	p := startPBX(t, Config{})
	capt := startCapture(t, p.AMIAddr())
	for _, c := range []struct {
		kv   []string
		want string
	}{
		{[]string{"Exten", "202"}, "Channel not specified"},
		{[]string{"Channel", "PJSIP/201", "Exten", "202", "Timeout", "soon"}, "Invalid timeout"},
		{[]string{"Channel", "201", "Exten", "202"}, "Invalid channel"},
	} {
		res, err := capt.cli.Do(ctx5(t), ami.NewAction("Originate", c.kv...))
		if err == nil || res.Response() != "Error" || res.Get("Message") != c.want {
			t.Errorf("Originate %v: %v, want Error %q", c.kv, res, c.want)
		}
	}
}
