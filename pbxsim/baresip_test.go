package pbxsim

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/ami"
)

// baresip is a real softphone (Debian's baresip) driven through its
// ctrl_tcp module. Its status line ("audio=<tx>/<rx> (bit/s)", the rates
// of the last second) tells whether RTP flows each way.
type baresip struct {
	t     *testing.T
	exten string
	ctrl  string
	mu    sync.Mutex
	out   bytes.Buffer
}

func (b *baresip) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.out.Write(p)
}

func (b *baresip) output() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.out.String()
}

// needBaresip fails (never skips) when baresip is missing: scripts/test.sh
// installs it.
func needBaresip(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("baresip"); err != nil {
		t.Fatal("baresip is not installed (Debian package baresip; scripts/test.sh installs it)")
	}
}

func freeTCPPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// toneWAV writes 30 s of a 440 Hz tone, 8 kHz mono, for baresip's aufile
// source, which plays it in real time (20 ms per packet).
func toneWAV(t *testing.T, path string) {
	t.Helper()
	const rate, secs = 8000, 30
	data := make([]byte, 2*rate*secs)
	for i := range rate * secs {
		binary.LittleEndian.PutUint16(data[2*i:], uint16(int16(8000*math.Sin(2*math.Pi*440*float64(i)/rate))))
	}
	var h bytes.Buffer
	h.WriteString("RIFF")
	binary.Write(&h, binary.LittleEndian, uint32(36+len(data)))
	h.WriteString("WAVEfmt ")
	for _, v := range []any{uint32(16), uint16(1), uint16(1), uint32(rate), uint32(2 * rate), uint16(2), uint16(16)} {
		binary.Write(&h, binary.LittleEndian, v)
	}
	h.WriteString("data")
	binary.Write(&h, binary.LittleEndian, uint32(len(data)))
	h.Write(data)
	if err := os.WriteFile(path, h.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// startBaresip runs baresip as extension exten of p until the test ends
// and waits for its registration.
func startBaresip(t *testing.T, p *PBX, exten, wav string) *baresip {
	t.Helper()
	dir := t.TempDir()
	b := &baresip{t: t, exten: exten, ctrl: fmt.Sprintf("127.0.0.1:%d", freeTCPPort(t))}
	config := "poll_method epoll\nsip_listen 127.0.0.1:0\n" +
		"audio_player alsa,null\naudio_alert alsa,null\naudio_source aufile," + wav + "\n" +
		"module_path /usr/lib/baresip/modules\nmodule g711.so\nmodule aufile.so\nmodule alsa.so\n" +
		"module_app account.so\nmodule_app menu.so\nmodule_app ctrl_tcp.so\nctrl_tcp_listen " + b.ctrl + "\n"
	accounts := "<sip:" + exten + "@" + p.SIPAddr() + ">;regint=600;answermode=auto;audio_codecs=PCMU\n"
	for name, body := range map[string]string{"config": config, "accounts": accounts, "contacts": ""} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("baresip", "-f", dir)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = b, b
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("baresip %s output (tail):\n%s", exten, tail(b.output(), 1500))
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for !p.Registered(exten) {
		if time.Now().After(deadline) {
			t.Fatalf("baresip %s did not register:\n%s", exten, tail(b.output(), 1500))
		}
		time.Sleep(50 * time.Millisecond)
	}
	// ctrl_tcp may listen after the account has registered (the suite
	// once had "connection refused" on the first command).
	for {
		c, err := net.DialTimeout("tcp", b.ctrl, time.Second)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("baresip %s: no ctrl_tcp on %s: %v\n%s", exten, b.ctrl, err, tail(b.output(), 1500))
		}
		time.Sleep(50 * time.Millisecond)
	}
	return b
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// command sends one ctrl_tcp command (a netstring of JSON) and waits for
// its response.
func (b *baresip) command(cmd, params string) {
	b.t.Helper()
	c, err := net.DialTimeout("tcp", b.ctrl, 5*time.Second)
	if err != nil {
		b.t.Fatalf("baresip %s ctrl: %v", b.exten, err)
	}
	defer c.Close()
	j, _ := json.Marshal(map[string]string{"command": cmd, "params": params, "token": "t"})
	fmt.Fprintf(c, "%d:%s,", len(j), j)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var buf []byte
	tmp := make([]byte, 4096)
	for !bytes.Contains(buf, []byte(`"response":true`)) {
		n, err := c.Read(tmp)
		if err != nil {
			b.t.Fatalf("baresip %s %s: %v (%s)", b.exten, cmd, err, buf)
		}
		buf = append(buf, tmp[:n]...)
	}
	if !bytes.Contains(buf, []byte(`"ok":true`)) {
		b.t.Fatalf("baresip %s %s %s: %s", b.exten, cmd, params, buf)
	}
}

var rateRE = regexp.MustCompile(`audio=(\d+)/(\d+) \(bit/s\)`)

// rates returns the last transmit and receive bit rates baresip printed.
func (b *baresip) rates() (tx, rx int) {
	m := rateRE.FindAllStringSubmatch(b.output(), -1)
	if len(m) == 0 {
		return 0, 0
	}
	tx, _ = strconv.Atoi(m[len(m)-1][1])
	rx, _ = strconv.Atoi(m[len(m)-1][2])
	return tx, rx
}

// waitAudio waits until both phones send and receive at least min bit/s
// (G.711 is 64000), or fails saying who does not.
func waitAudio(t *testing.T, what string, min int, phones ...*baresip) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		ok := true
		var state string
		for _, b := range phones {
			tx, rx := b.rates()
			state += fmt.Sprintf(" %s tx=%d rx=%d", b.exten, tx, rx)
			if tx < min || rx < min {
				ok = false
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: audio not flowing both ways:%s", what, state)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestBaresipHoldUnhold: two real softphones register with pbxsim, call,
// hold and unhold; RTP flows both ways before the hold and again after
// the unhold, and pbxsim reports Hold and Unhold.
func TestBaresipHoldUnhold(t *testing.T) {
	needBaresip(t)
	p := startPBX(t, Config{})
	cap := startCapture(t, p.AMIAddr())
	wav := filepath.Join(t.TempDir(), "tone.wav")
	toneWAV(t, wav)
	alice := startBaresip(t, p, "201", wav)
	bob := startBaresip(t, p, "202", wav)

	alice.command("dial", "202")
	waitAudio(t, "call up", 32000, alice, bob)
	alice.command("hold", "")
	cap.waitFor(t, "Hold", func(m []ami.Message) bool { return count(m, "Hold") == 1 })
	alice.command("resume", "")
	cap.waitFor(t, "Unhold", func(m []ami.Message) bool { return count(m, "Unhold") == 1 })
	time.Sleep(1500 * time.Millisecond) // let the rate of the last second reflect the unhold
	waitAudio(t, "after unhold", 32000, alice, bob)
	// The answers pointed Alice at Bob's media, never at pbxsim, with the
	// origin of the first answer, version up by one per change (RFC 3264).
	sent, peer := sdpOf(p, "201")
	if !bytes.Contains(sent, mediaLine(peer)) || !bytes.Contains(sent, originOf(peer, 2)) || !bytes.Contains(sent, []byte("a=sendrecv")) {
		t.Errorf("last answer to Alice:\n%s\nBob's media:\n%s", sent, peer)
	}

	// The same from the called side.
	bob.command("hold", "")
	cap.waitFor(t, "Hold by Bob", func(m []ami.Message) bool { return count(m, "Hold") == 2 })
	bob.command("resume", "")
	cap.waitFor(t, "Unhold by Bob", func(m []ami.Message) bool { return count(m, "Unhold") == 2 })
	time.Sleep(1500 * time.Millisecond)
	waitAudio(t, "after Bob's unhold", 32000, alice, bob)
	alice.command("hangup", "")
	waitNoChannels(t, p)
}

// sdpOf returns what pbxsim last sent exten's channel and the description
// of its peer's media.
func sdpOf(p *PBX, exten string) (sent, peer []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for ch := range p.exts[exten].chans {
		if br := ch.bridge; br != nil {
			for _, y := range br.chans {
				if y != ch {
					return ch.sdpSent, y.sdp
				}
			}
		}
	}
	return nil, nil
}

// mediaLine is the m= line of a description.
func mediaLine(sdp []byte) []byte {
	for line := range bytes.Lines(sdp) {
		if bytes.HasPrefix(line, []byte("m=")) {
			return bytes.TrimSpace(line)
		}
	}
	return []byte("no m= line")
}

// originOf is the o= line of a description with its version raised by up.
func originOf(sdp []byte, up uint64) []byte {
	for line := range bytes.Lines(sdp) {
		if f := bytes.Fields(line); len(f) == 6 && bytes.HasPrefix(line, []byte("o=")) {
			v, _ := strconv.ParseUint(string(f[2]), 10, 64)
			f[2] = strconv.AppendUint(nil, v+up, 10)
			return bytes.Join(f, []byte(" "))
		}
	}
	return []byte("no o= line")
}

// TestBaresipReferTransfer: a real softphone's transfer button (REFER).
// Bob calls Alice; Alice transfers Bob to Carol: BlindTransfer, Alice is
// hung up and Bob talks with Carol; Bob's call gives two Cdrs, as
// Asterisk's (blind_transfer_redirect). (A failed transfer is
// TestReferUnknownTarget: baresip 1.0 hangs up its own call when told its
// transfer failed.)
func TestBaresipReferTransfer(t *testing.T) {
	needBaresip(t)
	p := startPBX(t, Config{})
	cap := startCapture(t, p.AMIAddr())
	wav := filepath.Join(t.TempDir(), "tone.wav")
	toneWAV(t, wav)
	carol := startPhone(t, p, PhoneConfig{Exten: "203"})
	bob := startBaresip(t, p, "202", wav)
	alice := startBaresip(t, p, "201", wav)

	bob.command("dial", "201")
	waitAudio(t, "call up", 32000, alice, bob)

	alice.command("transfer", "sip:203@"+p.SIPAddr())
	var carolCall *PhoneCall
	select {
	case carolCall = <-carol.Answered():
	case <-time.After(10 * time.Second):
		t.Fatal("Carol was not called")
	}
	msgs := cap.waitFor(t, "Alice hung up, Bob with Carol", func(m []ami.Message) bool {
		return count(m, "Hangup", "CallerIDNum", "201") == 1 && count(m, "BridgeEnter", "CallerIDNum", "203") == 1
	})
	var bt ami.Message
	for _, m := range msgs {
		if m.Event() == "BlindTransfer" {
			bt = m
		}
	}
	if bt.Get("Result") != "Success" || bt.Get("TransfererCallerIDNum") != "201" || bt.Get("TransfereeCallerIDNum") != "202" ||
		bt.Get("Extension") != "203" || bt.Get("IsExternal") != "No" {
		t.Errorf("BlindTransfer %v", bt)
	}
	carolCall.Hangup(context.Background())
	waitNoChannels(t, p)
	msgs = cap.waitFor(t, "two Cdrs", func(m []ami.Message) bool { return count(m, "Cdr") == 2 })
	var cdrs []string
	for _, m := range msgs {
		if m.Event() == "Cdr" {
			cdrs = append(cdrs, m.Get("Channel")+">"+m.Get("DestinationChannel")[:10]+" "+m.Get("Disposition"))
		}
	}
	if len(cdrs) != 2 || !strings.HasPrefix(cdrs[0], "PJSIP/202-") || !strings.Contains(cdrs[0], ">PJSIP/201-") ||
		!strings.HasPrefix(cdrs[1], "PJSIP/202-") || !strings.Contains(cdrs[1], ">PJSIP/203-") {
		t.Errorf("Cdrs %q, want Bob's call to Alice then Bob's call to Carol", cdrs)
	}
}

// TestBaresipMediaOriginateQueue: calls whose first party pbxsim answered
// itself get the other party's media by re-INVITE: a click-to-call
// (Originate of Alice's phone to 202) and a queue call (Alice calls 600,
// member Carol answers) carry RTP both ways.
func TestBaresipMediaOriginateQueue(t *testing.T) {
	needBaresip(t)
	p := startPBX(t, Config{QueueMembers: []string{"203"}})
	capt := startCapture(t, p.AMIAddr())
	wav := filepath.Join(t.TempDir(), "tone.wav")
	toneWAV(t, wav)
	alice := startBaresip(t, p, "201", wav)
	bob := startBaresip(t, p, "202", wav)
	carol := startBaresip(t, p, "203", wav)

	res, err := capt.cli.Do(ctx5(t), ami.NewAction("Originate", "Channel", "PJSIP/201", "Exten", "202",
		"Context", "from-internal", "CallerID", "201", "Async", "true"))
	if err != nil || res.Response() != "Success" {
		t.Fatalf("Originate: %v %v", res, err)
	}
	waitAudio(t, "click-to-call", 32000, alice, bob)
	bob.command("hangup", "")
	waitNoChannels(t, p)

	time.Sleep(1500 * time.Millisecond) // the rates of the last call fade
	alice.command("dial", "600")
	waitAudio(t, "queue call", 32000, alice, carol)
	alice.command("hangup", "")
	waitNoChannels(t, p)
}
