// The panel's shared state: who is logged in and the live PBX state as
// the WebSocket (or REST polling) delivers it.

export const state = {
  me: null,            // GET /user/me
  exts: {},            // exten -> Extension
  queues: {},          // name -> Queue
  parkings: {},        // space -> Parking
  trunks: {},          // name -> Trunk
  confs: {},           // room -> Conference (GET astproxy/conferences, conferenceUpdate)
  presence: null,      // exten -> presence, when the server has the presence topic
  pbx: {pbx: 'live'},  // {"pbx":"live|resyncing|down",...}
  stale: false,
  link: 'connecting',  // live | reconnecting | polling | connecting
  attempt: 0,
};

// can reports whether the user may do an action (auth.Action names, from
// /user/me "actions").
export function can(action) {
  return !!state.me?.actions?.includes(action);
}

// inScope reports whether the user may act on endpoint exten (/user/me
// "scope"; null means everything).
export function inScope(exten) {
  const s = state.me?.scope;
  return s === null || s === undefined ? state.me?.role === 'admin' : s.includes(exten);
}

// myEndpoints are the extensions the user owns (calls bar, dial from).
export function myEndpoints() {
  return state.me?.endpoints || [];
}

// nameOf is the best display name of an extension.
export function nameOf(exten, x = state.exts[exten]) {
  if (x?.name) return x.name;
  for (const q of Object.values(state.queues)) {
    const m = q.members?.[exten];
    if (m?.name) return m.name;
  }
  return exten;
}
