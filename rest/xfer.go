package rest

import (
	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/calls"
)

// Ending an attended transfer, and taking a queue's waiting caller.
// Asterisk's attended transfer (the atxfer action) completes when the
// transferer hangs up and is cancelled when the consult's leg (the Local
// half bridged with the transferer) hangs up: that is what
// atxfer_complete and atxfer_cancel send. A transferer that hangs up
// while the target still rings makes it a blonde transfer: Asterisk
// connects the transferee when the target answers.

type queueCallerReq struct {
	Queue   string `json:"queue"`
	Channel string `json:"channel"`
	DestID  string `json:"destId"`
}

var callActions = []action{
	act("atxfer_complete", planAtxferEnd(true)),
	act("atxfer_cancel", planAtxferEnd(false)),
	act("pickup_qwaitcaller", planPickupQueueCaller),
}

// planAtxferEnd: convid is either conversation of the consulting
// transferer (the held one or the consult).
func planAtxferEnd(complete bool) func(h *handler, u *auth.User, s *calls.Snapshot, req *convReq) ([]ami.Message, error) {
	return func(h *handler, u *auth.User, s *calls.Snapshot, req *convReq) ([]ami.Message, error) {
		x, c, own, _, err := h.endpointConv(u, s, auth.Transfer, req.EndpointID, req.ConvID)
		if err != nil {
			return nil, err
		}
		t := c.Extras().Transfer
		if t.Role != "transferer" || t.State != "consulting" {
			return nil, conflict("conversation %q is not an attended transfer being consulted by %s", req.ConvID, x.Exten)
		}
		if complete {
			return []ami.Message{ami.NewAction(ami.ActionHangup, "Channel", own, "Cause", "16")}, nil
		}
		for _, cv := range x.Conversations {
			if ct := cv.Extras().Transfer; ct.ID == t.ID && ct.Consult && ct.Leg != "" {
				// The consult's own leg, never the target's channel: a
				// target that still rings would take its hangup for no
				// answer (voicemail).
				return []ami.Message{ami.NewAction(ami.ActionHangup, "Channel", ct.Leg, "Cause", "16")}, nil
			}
		}
		return nil, conflict("the transfer of %q has no consult call to hang up", req.ConvID)
	}
}

// planPickupQueueCaller sends a caller waiting in a queue to destId's
// phone (NethCTI's way: Redirect out of the queue).
func planPickupQueueCaller(h *handler, u *auth.User, s *calls.Snapshot, req *queueCallerReq) ([]ami.Message, error) {
	if req.Queue == "" || req.Channel == "" {
		return nil, badRequest("queue and channel are required")
	}
	if _, err := h.endpoint(u, s, auth.Pickup, "destId", req.DestID); err != nil {
		return nil, err
	}
	name, _ := s.QueueName(req.Queue) // its name, or the number dialled to reach it
	q, ok := s.Queues.Lookup(name)
	if !ok {
		return nil, notFound("queue %q does not exist", req.Queue)
	}
	if _, ok := q.WaitingCallers[req.Channel]; !ok && auth.IsOpaque(req.Channel) {
		// The channel as a filtered view shows it (auth.OpaqueChannel).
		for ch := range q.WaitingCallers {
			if auth.OpaqueChannel(ch) == req.Channel {
				req.Channel = ch
				break
			}
		}
	}
	if _, ok := q.WaitingCallers[req.Channel]; !ok {
		return nil, conflict("no caller %q waits in queue %s", req.Channel, q.Queue)
	}
	return []ami.Message{ami.NewAction(ami.ActionRedirect,
		"Channel", req.Channel, "Context", h.cfg.Context, "Exten", req.DestID, "Priority", "1")}, nil
}
