package auth

import "testing"

// The spied extension and the parker name the counterpart as much as
// counterpartNum does: a user who may not see the call sees them blank.
func TestViewRedactsConversationExtras(t *testing.T) {
	us := mustUsers(t)
	alice, _ := us.Lookup("alice")
	ext := `{"exten":"203","conversations":{"a>b":{"id":"a>b","counterpartNum":"201","transfer":{"id":"1.2","state":"consulting","role":"target"},"parked":{"parking":"701","by":"202","timeout":45},"spy":{"exten":"201","mode":"listen"}}}}`
	ab := OpaqueConvID("a>b")
	want := `{"exten":"203","conversations":{"` + ab + `":{"id":"` + ab + `","counterpartNum":"","transfer":{"id":"1.2","state":"consulting","role":"target"},"parked":{"parking":"701","by":"","timeout":45},"spy":{"exten":"","mode":"listen"}}}}`
	if got := string(ViewOf(alice).Extension("203", []byte(ext))); got != want {
		t.Errorf("alice sees\n%s\nwant\n%s", got, want)
	}
	conv := `{"id":"a>b","counterpartNum":"201","spy":{"exten":"201","mode":"barge"},"parked":{"parking":"701","by":"202","timeout":45}}`
	wantConv := `{"id":"` + ab + `","counterpartNum":"","spy":{"exten":"","mode":"barge"},"parked":{"parking":"701","by":"","timeout":45}}`
	if got := string(ViewOf(alice).Conversation("203", []byte(conv))); got != wantConv {
		t.Errorf("conversation:\n%s", got)
	}
}
