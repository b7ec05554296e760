package sio

import "github.com/ctibridge/ctibridge/calls"

// causeNames names Asterisk's hangup causes (Q.850 codes) as NethCTI's
// extenHangup does: the AST_CAUSE_ constant's name in lower case, 0 the
// cause "not defined". phone-island reads normal_clearing, user_busy,
// call_rejected, subscriber_absent, normal_circuit_congestion,
// not_defined and interworking.
var causeNames = map[int]string{
	0: "not_defined", 1: "unallocated", 2: "no_route_transit_net", 3: "no_route_destination",
	5: "misdialled_trunk_prefix", 6: "channel_unacceptable", 7: "call_awarded_delivered", 8: "pre_empted",
	14: "number_ported_not_here", 16: "normal_clearing", 17: "user_busy", 18: "no_user_response",
	19: "no_answer", 20: "subscriber_absent", 21: "call_rejected", 22: "number_changed",
	23: "redirected_to_new_destination", 26: "answered_elsewhere", 27: "destination_out_of_order",
	28: "invalid_number_format", 29: "facility_rejected", 30: "response_to_status_enquiry",
	31: "normal_unspecified", 34: "normal_circuit_congestion", 38: "network_out_of_order",
	41: "normal_temporary_failure", 42: "switch_congestion", 43: "access_info_discarded",
	44: "requested_chan_unavail", 50: "facility_not_subscribed", 52: "outgoing_call_barred",
	54: "incoming_call_barred", 57: "bearercapability_notauth", 58: "bearercapability_notavail",
	65: "bearercapability_notimpl", 66: "chan_not_implemented", 69: "facility_not_implemented",
	81: "invalid_call_reference", 88: "incompatible_destination", 95: "invalid_msg_unspecified",
	96: "mandatory_ie_missing", 97: "message_type_nonexist", 98: "wrong_message", 99: "ie_nonexist",
	100: "invalid_ie_contents", 101: "wrong_call_state", 102: "recovery_on_timer_expire",
	103: "mandatory_ie_length_error", 111: "protocol_error", 127: "interworking",
}

// causeOf is extenHangup's cause for the conversation whose owner's
// channel is uid: the name of the cause its Hangup event gave; "" (no
// cause field, as NethCTI for a code it has no name for) for a code
// without a name or a Hangup without a Cause; normal_clearing when the
// conversation ended without its channel's Hangup (a change the engine
// took from a resync, a channel that left the extension).
func causeOf(hs []calls.Hangup, uid string) string {
	for _, h := range hs {
		if h.UniqueID == uid {
			return causeNames[h.Cause]
		}
	}
	return "normal_clearing"
}
