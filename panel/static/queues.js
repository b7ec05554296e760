// Queues (members: logged in, paused with reason, in a call, calls taken;
// one's own login/logout and pause with a reason; waiting callers with
// their waiting time) and parking lots (who parked, time to the timeout,
// pickup).

import {el, clock, fmtDuration, fmtTime, toast, numberButton, applyDelta} from './util.js';
import {api} from './api.js';
import {t} from './i18n.js';
import {state, can, myEndpoints, nameOf} from './state.js';
import {effectiveStatus, statusText} from './describe.js';

const byNum = (a, b) => a.localeCompare(b, undefined, {numeric: true});
const who = (name, num) => (name && num && name !== num ? `${name} (${num})` : (name || num || t('q.hiddenCaller')));

// post runs an action and says how it went, a refusal in plain words.
async function post(path, body, what) {
  try {
    await api.post('/astproxy/' + path, body);
    toast(t('msg.done', {what}));
    return true;
  } catch (e) {
    toast(t('msg.failed', {what, why: e.message}), 'error');
    return false;
  }
}

// applyQueueDelta applies a queueMembers event to queues: the queue's
// fields replaced (its waiting callers whole), its members set and
// removed.
export const applyQueueDelta = (queues, d) => applyDelta(queues, d, 'queue', 'members');

// serviceLevel is a queue's service level as app_queue's ServicelevelPerf
// (the completed calls answered within it, of all completed), when the
// queue has one.
function serviceLevel(q) {
  if (!q.serviceLevel) return null;
  const pct = q.completed ? Math.round(100 * (q.completedInServiceLevel || 0) / q.completed) + '%' : '–';
  return el('span', {class: 'sl'}, ' · ' + t('q.sl', {pct, secs: q.serviceLevel}));
}

export class QueuesView {
  // onCall(number): click-to-call a waiting or parked caller's number.
  constructor(qroot, proot, onCall) {
    this.qroot = qroot;
    this.proot = proot;
    this.onCall = onCall;
    this.timers = []; // [span, since ms, mode]
  }

  render() {
    // Keep a half-typed pause reason across re-renders.
    const typing = document.activeElement?.matches?.('.reason') ? document.activeElement : null;
    const saved = typing ? [typing.dataset.queue, typing.value] : null;
    this.timers = [];
    this.renderQueues();
    this.renderParkings();
    this.tick();
    if (saved) {
      const i = this.qroot.querySelector(`.reason[data-queue="${CSS.escape(saved[0])}"]`);
      if (i) { i.value = saved[1]; i.focus(); }
    }
  }

  renderQueues() {
    const names = Object.keys(state.queues).sort(byNum);
    if (!names.length) {
      this.qroot.replaceChildren(el('p', {class: 'muted'}, t('q.none')));
      return;
    }
    this.qroot.replaceChildren(...names.map((n) => this.queue(state.queues[n])));
  }

  memberRow(q, m) {
    const x = state.exts[m.member];
    const st = x ? effectiveStatus(x) : 'offline';
    const flags = [];
    if (!m.loggedIn) flags.push(t('q.loggedOut'));
    if (m.paused) flags.push(m.pausedReason ? t('q.pausedWhy', {why: m.pausedReason}) : t('q.paused'));
    if (['busy', 'busy_ringing', 'ringing', 'onhold', 'parked'].includes(st)) flags.push(statusText(st).toLowerCase());
    // How long the member has been paused, ticking (lastPause: when the
    // pause began).
    const pausedFor = m.paused && m.lastPause ? el('span', {class: 'dur paused-for', title: t('q.pausedFor')}) : null;
    if (pausedFor) this.timers.push([pausedFor, m.lastPause, 'up']);
    // An agent steers their own membership; a supervisor (queue_manager)
    // any agent's: pause with a reason, unpause, log out or in.
    const own = myEndpoints().includes(m.member);
    const mine = can('queue_member') && (own || supervises());
    const of = own ? '' : ' ' + t('q.ofAgent', {who: m.name || nameOf(m.member)});
    const body = {endpointId: m.member, queueId: q.queue};
    const reason = mine && m.loggedIn && !m.paused && el('input', {class: 'reason', 'data-queue': q.queue, autocomplete: 'off',
      placeholder: t('q.reasonPh'), 'aria-label': t('q.reason') + of});
    const pause = () => post(m.paused ? 'queuemember_unpause' : 'queuemember_pause',
      m.paused ? body : {...body, reason: (reason && reason.value.trim()) || undefined}, m.paused ? t('q.unpause') : t('q.pause'));
    if (reason) reason.addEventListener('keydown', (e) => { if (e.key === 'Enter') pause(); });
    return el('li', {class: 'member st-' + (m.paused ? 'paused' : st), 'data-member': m.member},
      el('span', {class: 'dot', 'aria-hidden': 'true'}),
      el('span', {class: 'name', title: m.type === 'dynamic' && m.loggedIn && m.loginTime ? t('q.loggedInAt', {time: fmtTime(m.loginTime)}) : null},
        m.name || nameOf(m.member)),
      el('span', {class: 'num'}, m.member),
      el('span', {class: 'flags'}, flags.join(', ') || t('q.available')),
      pausedFor,
      el('span', {class: 'taken', title: t('q.callsTaken')}, t('q.calls', {n: m.callsTaken ?? 0})),
      reason,
      mine && m.loggedIn && el('button', {type: 'button', 'data-role': m.paused ? 'unpause' : 'pause', onclick: pause,
        'aria-label': (m.paused ? t('q.unpause') : t('q.pause')) + of}, m.paused ? t('q.unpause') : t('q.pause')),
      mine && m.type !== 'static' && el('button', {type: 'button', 'data-role': m.loggedIn ? 'qlogout' : 'qlogin',
        'aria-label': (m.loggedIn ? t('q.logout') : t('q.login')) + of,
        onclick: () => post(m.loggedIn ? 'queuemember_remove' : 'queuemember_add', body, (m.loggedIn ? t('q.logout') : t('q.login')) + of)},
      m.loggedIn ? t('q.logout') : t('q.login')));
  }

  queue(q) {
    const members = Object.values(q.members || {}).sort((a, b) => byNum(a.member, b.member));
    // The waiting callers are keyed by their channel, which the answer
    // (pickup_qwaitcaller) names.
    const waiting = Object.entries(q.waitingCallers || {}).map(([ch, w]) => ({...w, channel: w.channel || ch}))
      .sort((a, b) => (a.position || 0) - (b.position || 0));
    const dest = myEndpoints()[0];
    const waitRow = (w) => {
      const span = el('span', {class: 'dur'});
      this.timers.push([span, w.waitingSince, 'up']);
      const answer = () => post('pickup_qwaitcaller', {queue: q.queue, channel: w.channel, destId: dest}, t('q.answer'));
      return el('li', {class: 'waiting', 'data-channel': w.channel},
        el('span', {class: 'pos'}, `#${w.position}`),
        el('span', {class: 'peer'}, numberButton(who(w.name, w.num), w.num, this.onCall, t('act.callBack', {number: w.num}))),
        el('span', {class: 'muted'}, t('q.waitingWord')), span,
        dest && can('pickup') && el('button', {type: 'button', 'data-role': 'qanswer', onclick: answer,
          'aria-label': t('q.answerLabel', {who: who(w.name, w.num)})}, t('q.answer')));
    };
    // Log in to a queue one is not a member of yet (dynamic members).
    const absent = myEndpoints().filter((e) => !q.members?.[e]);
    const label = q.name || q.queue;
    return el('section', {class: 'queue', 'data-queue': q.queue, 'aria-label': t('q.label', {name: label})},
      el('h3', null, label, q.name && q.name !== q.queue ? el('span', {class: 'muted'}, ` ${q.queue}`) : null),
      el('p', {class: 'qstats'}, t('q.stats', {waiting: waiting.length, completed: q.completed ?? 0, abandoned: q.abandoned ?? 0,
        hold: fmtDuration(q.holdTime || 0), talk: fmtDuration(q.talkTime || 0)}), serviceLevel(q)),
      el('h4', null, t('q.waiting')),
      waiting.length ? el('ol', {class: 'waiting-list'}, ...waiting.map(waitRow)) : el('p', {class: 'muted'}, t('q.nobody')),
      el('h4', null, t('q.members')),
      members.length ? el('ul', {class: 'member-list'}, ...members.map((m) => this.memberRow(q, m))) : el('p', {class: 'muted'}, t('q.noMembers')),
      can('queue_member') && absent.length ? el('p', null, ...absent.map((e) => el('button', {type: 'button', 'data-role': 'qlogin',
        onclick: () => post('queuemember_add', {endpointId: e, queueId: q.queue}, t('q.login'))}, `${t('q.login')} (${e})`))) : null);
  }

  renderParkings() {
    const spaces = Object.keys(state.parkings).sort(byNum);
    if (!spaces.length) {
      this.proot.replaceChildren(el('p', {class: 'muted'}, t('p.none')));
      return;
    }
    const dest = myEndpoints()[0];
    const rows = spaces.map((s) => {
      const p = state.parkings[s];
      const c = p.parkedCaller;
      const since = el('span', {class: 'dur'});
      const left = el('span', {class: 'left'});
      if (c) {
        this.timers.push([since, c.parkedAt, 'up']);
        if (p.timeout > 0 && c.parkedAt) this.timers.push([left, c.parkedAt + p.timeout * 1000, 'down']);
      }
      const pickup = async () => {
        if (await post('pickup_parking', {parking: p.parking, destId: dest}, t('p.pickup'))) toast(t('msg.pickingUp', {parking: p.parking}));
      };
      return el('li', {class: 'parking' + (c ? ' taken' : ''), 'data-parking': p.parking},
        el('span', {class: 'space'}, p.name || p.parking),
        c ? el('span', {class: 'peer'}, numberButton(who(c.name, c.num), c.num, this.onCall, t('act.callBack', {number: c.num}))) : el('span', {class: 'muted'}, t('p.free')),
        c && c.parkedBy ? el('span', {class: 'muted'}, t('p.by', {by: nameOf(c.parkedBy)})) : null,
        since, left,
        c && can('pickup_parking') && dest && el('button', {type: 'button', 'data-role': 'pickup', onclick: pickup, 'aria-label': t('p.pickupLabel', {parking: p.parking})}, t('p.pickup')));
    });
    this.proot.replaceChildren(el('ul', {class: 'parking-list'}, ...rows));
  }

  tick() {
    const now = clock.now();
    for (const [span, at, mode] of this.timers) {
      if (!at) continue;
      if (mode === 'up') span.textContent = fmtDuration((now - at) / 1000);
      else span.textContent = at > now ? t('p.left', {time: fmtDuration((at - now) / 1000)}) : t('p.back');
    }
  }
}

// supervises: the user may steer any agent's queue membership (the
// queue_manager capability of /user/me).
function supervises() {
  return !!state.me?.capabilities?.includes('queue_manager');
}
