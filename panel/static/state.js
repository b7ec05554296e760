// The panel's shared state: who is logged in and the live PBX state as
// the WebSocket (or REST polling) delivers it.

export const state = {
  me: null,            // GET /user/me
  exts: {},            // exten -> Extension
  queues: {},          // name -> Queue
  parkings: {},        // space -> Parking
  trunks: {},
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
  return 'Ext ' + exten;
}
