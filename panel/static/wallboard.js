// The wallboard: one tile per queue in type large enough to read from
// across a room: callers waiting, the longest wait (ticking), the service
// level (app_queue's ServicelevelPerf, as the queues view computes it),
// and the agents by state (available, in a call, paused, logged out).
// Full screen on request; it follows the same live state as the queues.

import {el, clock, fmtDuration} from './util.js';
import {t} from './i18n.js';
import {state} from './state.js';
import {effectiveStatus} from './describe.js';

const byNum = (a, b) => a.localeCompare(b, undefined, {numeric: true});
const IN_CALL = ['busy', 'busy_ringing', 'ringing', 'onhold', 'parked'];

// agentsOf counts a queue's members by state.
export function agentsOf(q) {
  const n = {available: 0, busy: 0, paused: 0, out: 0};
  for (const m of Object.values(q.members || {})) {
    const x = state.exts[m.member];
    const st = x ? effectiveStatus(x) : 'offline';
    if (!m.loggedIn) n.out++;
    else if (IN_CALL.includes(st)) n.busy++;
    else if (m.paused) n.paused++;
    else if (st === 'online') n.available++;
    else n.out++; // logged in but offline or DND: takes no call
  }
  return n;
}

export class Wallboard {
  constructor(root) {
    this.root = root;
    this.longest = []; // [span, oldest waitingSince]
    root.closest('section')?.querySelector('#wall-full')?.addEventListener('click', () => {
      const s = root.closest('section');
      if (document.fullscreenElement) document.exitFullscreen().catch(() => {});
      else s.requestFullscreen?.().catch(() => {});
    });
  }

  render() {
    const names = Object.keys(state.queues).sort(byNum);
    this.longest = [];
    if (!names.length) {
      this.root.replaceChildren(el('p', {class: 'muted'}, t('q.none')));
      return;
    }
    this.root.replaceChildren(...names.map((n) => this.tile(state.queues[n])));
    this.tick();
  }

  tile(q) {
    const waiting = Object.values(q.waitingCallers || {});
    const oldest = waiting.reduce((a, w) => (w.waitingSince && (!a || w.waitingSince < a) ? w.waitingSince : a), 0);
    const longest = el('span', {class: 'wb-num', 'data-role': 'longest'}, '–');
    if (oldest) this.longest.push([longest, oldest]);
    const sl = q.serviceLevel ? (q.completed ? Math.round(100 * (q.completedInServiceLevel || 0) / q.completed) + '%' : '–') : '';
    const a = agentsOf(q);
    const fig = (role, label, value, cls = '') => el('div', {class: 'wb-fig ' + cls, 'data-role': role},
      typeof value === 'object' ? value : el('span', {class: 'wb-num'}, String(value)), el('span', {class: 'wb-label'}, label));
    return el('section', {class: 'wb-queue' + (waiting.length ? ' wb-alert' : ''), 'data-queue': q.queue, 'aria-label': t('q.label', {name: q.name || q.queue})},
      el('h3', null, q.name || q.queue),
      el('div', {class: 'wb-figs'},
        fig('waiting', t('wb.waiting'), waiting.length, waiting.length ? 'hot' : ''),
        fig('longest', t('wb.longest'), longest),
        sl && fig('sl', t('wb.sl', {secs: q.serviceLevel}), sl)),
      el('div', {class: 'wb-figs wb-agents'},
        fig('available', t('wb.available'), a.available, 'st-online'),
        fig('busy', t('wb.busy'), a.busy, 'st-busy'),
        fig('paused', t('wb.paused'), a.paused, 'st-paused'),
        fig('out', t('wb.out'), a.out, 'st-offline')));
  }

  tick() {
    const now = clock.now();
    for (const [span, at] of this.longest) span.textContent = fmtDuration((now - at) / 1000);
  }
}
