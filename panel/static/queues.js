// Queues (members: logged in, paused, in a call; waiting callers with
// their waiting time) and parking lots (with pickup).

import {el, clock, fmtDuration, toast} from './util.js';
import {api} from './api.js';
import {state, can, myEndpoints, nameOf} from './state.js';
import {STATUS_LABEL, effectiveStatus} from './grid.js';

const byNum = (a, b) => a.localeCompare(b, undefined, {numeric: true});

export class QueuesView {
  constructor(qroot, proot) {
    this.qroot = qroot;
    this.proot = proot;
    this.timers = []; // [span, since ms]
  }

  render() {
    this.timers = [];
    this.renderQueues();
    this.renderParkings();
  }

  renderQueues() {
    const names = Object.keys(state.queues).sort(byNum);
    if (!names.length) {
      this.qroot.replaceChildren(el('p', {class: 'muted'}, 'No queues.'));
      return;
    }
    this.qroot.replaceChildren(...names.map((n) => this.queue(state.queues[n])));
  }

  queue(q) {
    const members = Object.values(q.members || {}).sort((a, b) => byNum(a.member, b.member));
    const waiting = Object.values(q.waitingCallers || {}).sort((a, b) => (a.position || 0) - (b.position || 0));
    const mine = new Set(myEndpoints());
    const memberRow = (m) => {
      const x = state.exts[m.member];
      const st = x ? effectiveStatus(x) : 'offline';
      const inCall = ['busy', 'busy_ringing', 'ringing', 'onhold'].includes(st);
      const flags = [];
      if (!m.loggedIn) flags.push('logged out');
      if (m.paused) flags.push('paused' + (m.pausedReason ? ` (${m.pausedReason})` : ''));
      if (inCall) flags.push(STATUS_LABEL[st].toLowerCase());
      const canPause = can('queue_member') && mine.has(m.member) && m.loggedIn;
      const pause = async () => {
        try {
          await api.post('/astproxy/' + (m.paused ? 'queuemember_unpause' : 'queuemember_pause'), {endpointId: m.member, queueId: q.queue});
        } catch (e) { toast(e.message, 'error'); }
      };
      return el('li', {class: 'member st-' + (m.paused ? 'paused' : st)},
        el('span', {class: 'dot', 'aria-hidden': 'true'}),
        el('span', {class: 'name'}, m.name || nameOf(m.member)),
        el('span', {class: 'num'}, m.member),
        el('span', {class: 'flags'}, flags.join(', ') || 'available'),
        el('span', {class: 'taken', title: 'calls taken'}, `${m.callsTaken ?? 0} calls`),
        canPause && el('button', {type: 'button', onclick: pause}, m.paused ? 'Unpause' : 'Pause'));
    };
    const waitRow = (w) => {
      const t = el('span', {class: 'dur'});
      this.timers.push([t, w.waitingSince]);
      return el('li', {class: 'waiting'},
        el('span', {class: 'pos'}, `#${w.position}`),
        el('span', {class: 'peer'}, w.name && w.num ? `${w.name} (${w.num})` : (w.name || w.num || 'hidden caller')),
        el('span', {class: 'muted'}, 'waiting'), t);
    };
    return el('section', {class: 'queue', 'aria-label': `Queue ${q.name || q.queue}`},
      el('h3', null, q.name || q.queue, q.name && q.name !== q.queue ? el('span', {class: 'muted'}, ` ${q.queue}`) : null),
      el('p', {class: 'qstats'}, `${waiting.length} waiting · ${q.completed ?? 0} answered · ${q.abandoned ?? 0} abandoned · hold ${fmtDuration(q.holdTime || 0)} · talk ${fmtDuration(q.talkTime || 0)}`),
      el('h4', null, 'Waiting callers'),
      waiting.length ? el('ol', {class: 'waiting-list'}, ...waiting.map(waitRow)) : el('p', {class: 'muted'}, 'Nobody waiting.'),
      el('h4', null, 'Members'),
      members.length ? el('ul', {class: 'member-list'}, ...members.map(memberRow)) : el('p', {class: 'muted'}, 'No members.'));
  }

  renderParkings() {
    const spaces = Object.keys(state.parkings).sort(byNum);
    if (!spaces.length) {
      this.proot.replaceChildren(el('p', {class: 'muted'}, 'No parked calls.'));
      return;
    }
    const dest = myEndpoints()[0];
    const rows = spaces.map((s) => {
      const p = state.parkings[s];
      const c = p.parkedCaller;
      const t = el('span', {class: 'dur'});
      if (c) this.timers.push([t, c.parkedAt]);
      const pickup = async () => {
        try {
          await api.post('/astproxy/pickup_parking', {parking: p.parking, destId: dest});
          toast(`Picking up the call parked on ${p.parking}`);
        } catch (e) { toast(e.message, 'error'); }
      };
      return el('li', {class: 'parking' + (c ? ' taken' : '')},
        el('span', {class: 'space'}, p.name || p.parking),
        c ? el('span', {class: 'peer'}, c.name && c.num ? `${c.name} (${c.num})` : (c.name || c.num || 'hidden caller')) : el('span', {class: 'muted'}, 'free'),
        c ? el('span', {class: 'muted'}, c.parkedBy ? `parked by ${c.parkedBy}` : '') : null,
        t,
        c && can('pickup_parking') && dest && el('button', {type: 'button', onclick: pickup, 'aria-label': `Pick up the call parked on ${p.parking}`}, 'Pick up'));
    });
    this.proot.replaceChildren(el('ul', {class: 'parking-list'}, ...rows));
  }

  tick() {
    const now = clock.now();
    for (const [span, since] of this.timers) {
      if (since) span.textContent = fmtDuration((now - since) / 1000);
    }
  }
}
