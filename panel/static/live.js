// Live state over the WebSocket (docs/websocket.md): auth as the first
// message (the token never goes in a URL), subscribe, take the snapshot,
// apply events in seq order. After a drop it reconnects with backoff and
// resumes with since = the last seq seen (and the hub's epoch), so that
// only the missed events come, or a fresh snapshot when they are gone.
// The page is never reloaded.
//
// When the server has no /ws at all, it falls back to polling the REST
// reads, and keeps trying the WebSocket now and then.

import {api} from './api.js';
import {clock} from './util.js';

const TOPICS = ['extensions', 'queues', 'parkings', 'trunks', 'me'];
// The hub closes a connection that asks for a topic it does not know:
// optional ones (presence) are added only once the server showed it has
// them (app.js probes the REST routes).
const PING_EVERY = 20000, PONG_WAIT = 10000;

export class Live {
  // handlers: snapshot(msg), event(msg), status(state), authFailed(code, reason)
  constructor(handlers) {
    this.h = handlers;
    this.ws = null;
    this.seq = null;     // last seq applied
    this.epoch = null;   // the hub's epoch, for resume
    this.attempt = 0;
    this.stopped = true;
    this.everOpen = false;
    this.timers = new Set();
    this.polling = false;
    this.etags = {};
    this.noDeltas = new Set(); // deltas this server closed with 4004 for
  }

  // renew hands the open socket a renewed token; a socket not open yet
  // sends it when it opens (connect reads api.token).
  renew() {
    if (this.ws?.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify({op: 'auth', token: api.token}));
  }

  // topics sets the optional topics to subscribe to besides TOPICS.
  topics(extra) { this.extra = extra; }

  start() {
    this.stopped = false;
    this.connect();
  }

  stop() {
    this.stopped = true;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    clearInterval(this.pinger);
    if (this.ws) { this.ws.onclose = null; this.ws.close(1000, 'logout'); this.ws = null; }
    this.seq = null;
    this.epoch = null;
    this.polling = false;
  }

  later(f, ms) {
    const t = setTimeout(() => { this.timers.delete(t); f(); }, ms);
    this.timers.add(t);
  }

  connect() {
    if (this.stopped) return;
    const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
    let ws;
    try {
      ws = new WebSocket(`${proto}//${location.host}/ws`);
    } catch {
      this.retry();
      return;
    }
    this.ws = ws;
    let greeted = false;
    ws.onopen = () => ws.send(JSON.stringify({op: 'auth', token: api.token}));
    ws.onmessage = (ev) => {
      let m;
      try { m = JSON.parse(ev.data); } catch { return; }
      this.lastHeard = performance.now();
      switch (m.op) {
        case 'hello': {
          greeted = true;
          this.everOpen = true;
          this.attempt = 0;
          if (this.polling) this.polling = false;
          // Trunks and queues as what changed in them
          // (trunkConversations, queueMembers): a call centre's trunk
          // holds a thousand calls, its queue 40 agents. A server
          // without deltas ignores the field and sends trunkUpdate and
          // queueUpdate. Status: a node that cannot hear its bus (and
          // hears it again) says so with a pbxStatus at the seq we have,
          // not a snapshot. A server from before one of them closes with
          // 4004 naming it (a node not upgraded yet): then without it.
          const deltas = ['trunks', 'queues', 'status'].filter((d) => !this.noDeltas.has(d));
          const sub = {op: 'subscribe', topics: [...TOPICS, ...(this.extra || [])], deltas};
          if (this.seq !== null && this.epoch && m.epoch === this.epoch) {
            sub.since = this.seq;
            sub.epoch = this.epoch;
          }
          this.epoch = m.epoch ?? null;
          ws.send(JSON.stringify(sub));
          this.startPing(ws);
          break;
        }
        case 'snapshot':
          this.seq = m.seq;
          // A node that cannot hear its bus names its stale snapshot
          // with an epoch of its own: resume with the snapshot's.
          if (m.epoch) this.epoch = m.epoch;
          this.h.snapshot(m);
          this.h.status('live');
          break;
        case 'resumed':
          this.h.status('live');
          break;
        case 'event':
          // Already applied; but a pbxStatus out of the feed (status
          // deltas) comes at the seq of the message before it.
          if (this.seq !== null && (m.seq < this.seq || m.seq === this.seq && m.type !== 'pbxStatus')) return;
          this.seq = m.seq;
          clock.observe(m.at);
          this.h.event(m);
          break;
        case 'pong':
          this.pongDue = 0;
          break;
      }
    };
    ws.onclose = (ev) => {
      clearInterval(this.pinger);
      if (this.ws !== ws) return;
      this.ws = null;
      if (this.stopped) return;
      const unknown = ev.code === 4004 && /^deltas: "(\w+)" has none/.exec(ev.reason || '');
      if (unknown) this.noDeltas.add(unknown[1]); // its deltas know no such name
      if (ev.code === 4001 || ev.code === 4002 || ev.code === 4003) {
        this.h.authFailed(ev.code, ev.reason || '');
        return;
      }
      if (!greeted && !this.everOpen && this.attempt >= 1) {
        this.startPolling(); // no WebSocket on this server
        return;
      }
      this.retry();
    };
  }

  retry() {
    this.attempt++;
    this.h.status('reconnecting', this.attempt);
    // 0.25 s, 0.5 s, 1 s, ... up to 10 s, with jitter.
    const base = Math.min(10000, 250 * 2 ** (this.attempt - 1));
    this.later(() => this.connect(), base / 2 + Math.random() * base / 2);
  }

  startPing(ws) {
    clearInterval(this.pinger);
    this.pongDue = 0;
    this.pinger = setInterval(() => {
      if (this.pongDue && performance.now() > this.pongDue) {
        ws.close(4000, 'no pong'); // dead link: onclose reconnects
        return;
      }
      if (ws.readyState === WebSocket.OPEN) {
        ws.send('{"op":"ping"}');
        if (!this.pongDue) this.pongDue = performance.now() + PONG_WAIT;
      }
    }, PING_EVERY);
  }

  // Polling fallback: the REST reads every 2 s, a snapshot-like message
  // when any changed (ETag), and a WebSocket attempt every 30 s.
  startPolling() {
    if (this.polling || this.stopped) return;
    this.polling = true;
    this.h.status('polling');
    let n = 0;
    const tick = async () => {
      if (!this.polling || this.stopped) return;
      try {
        await this.pollOnce();
      } catch (e) {
        if (e.status === 401) return;
      }
      if (++n % 15 === 0) this.connect();
      this.later(tick, 2000);
    };
    tick();
  }

  async pollOnce() {
    const [extensions, queues, parkings, status] = await Promise.all([
      api.get('/astproxy/extensions'), api.get('/astproxy/queues'),
      api.get('/astproxy/parkings'), api.get('/astproxy/status'),
    ]);
    if (!this.polling) return;
    const key = JSON.stringify([extensions, queues, parkings, status]);
    if (key === this.lastPoll) return;
    this.lastPoll = key;
    this.h.snapshot({op: 'snapshot', extensions, queues, parkings, pbx: status, stale: status.pbx !== 'live', polled: true});
  }
}
