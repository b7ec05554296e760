package calls

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"unsafe"
)

// TestRemoveOwned: removeOwned leaves the slice removeChan leaves, and
// every channel's ownerAt its index, so that the next removal finds it
// there (a wrong index would fall back to removeChan's scan unseen).
func TestRemoveOwned(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var s, want []*channel
	for range 2000 {
		if len(s) == 0 || r.IntN(3) > 0 {
			c := &channel{}
			s = addOwned(s, c)
			want = append(want, c)
		} else {
			c := s[r.IntN(len(s))]
			s = removeOwned(s, c)
			want = removeChan(want, c)
		}
		if len(s) != len(want) {
			t.Fatalf("len %d, want %d", len(s), len(want))
		}
		for i, c := range s {
			if c != want[i] {
				t.Fatalf("slot %d differs from removeChan's", i)
			}
			if int(c.ownerAt) != i {
				t.Fatalf("channel at %d has ownerAt %d", i, c.ownerAt)
			}
		}
	}
}

// TestConversationSize: a conversation is 192 bytes, so an extension's
// map holding one (eight slots of key and value) takes the 1,792-byte size
// class, not the 2,048 one: the flags sit together, the call id is the
// Linkedid (no field of its own).
func TestConversationSize(t *testing.T) {
	if n := unsafe.Sizeof(Conversation{}); n > 192 {
		t.Errorf("Conversation is %d bytes, want 192 at most", n)
	}
	cv := Conversation{ID: "PJSIP/201-1>PJSIP/202-2", LinkedID: "1.1"}
	if b := appendConvHead(nil, &cv, enc{}); !bytes.Contains(b, []byte(`"callId":"1.1"`)) {
		t.Errorf("JSON %s: want the Linkedid as callId", b)
	}
}

// TestChannelSize: ownerAt sits in the bools' padding, the channel stays
// in its 352-byte size class.
func TestChannelSize(t *testing.T) {
	if n := unsafe.Sizeof(channel{}); n > 352 {
		t.Errorf("channel is %d bytes, want <= 352", n)
	}
}

// TestOwnerShared: a channel's owner is its extension's or trunk's own
// string, not a piece of the Newchannel it came in: a map lookup by it
// compares equal pointers, and reads no old message.
func TestOwnerShared(t *testing.T) {
	e := New(Config{Trunks: []string{"carrier"}})
	e.Apply(scaleChanEv("Newchannel", "PJSIP/201-00000001", "201", "<unknown>", "202", "1.1", "1.1", 4))
	e.Apply(scaleChanEv("Newchannel", "PJSIP/carrier-00000002", "555", "<unknown>", "201", "1.2", "1.2", 4))
	for uid, own := range map[string]string{"1.1": e.exts["201"].exten, "1.2": e.trunks["carrier"].name} {
		c := e.chans[uid]
		if c == nil || c.owner != own || unsafe.StringData(c.owner) != unsafe.StringData(own) {
			t.Errorf("channel %s: owner not its owner's string %q", uid, own)
		}
	}
}
