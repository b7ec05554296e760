// What a conversation is, in words, derived only from the redacted state
// the server sends: who the other party is (never a bare arrow: a hidden
// party is "private number"), and what the call is doing (parked, being
// transferred, spied on, in a conference). Cards, the calls bar and the
// queue view all describe calls through these functions.

import {t} from './i18n.js';
import {state, myEndpoints, nameOf} from './state.js';
import {clock, fmtDuration} from './util.js';

export const STATUS = ['online', 'ringing', 'busy', 'busy_ringing', 'onhold', 'dnd', 'offline', 'parked'];

// effectiveStatus folds DND and a parked call into the status an operator
// cares about: a parked caller is not "busy".
export function effectiveStatus(x) {
  let s = x.status || 'offline';
  if (!STATUS.includes(s)) s = 'offline';
  if (x.dnd && s === 'online') return 'dnd';
  if (s === 'busy' || s === 'onhold') {
    const cs = Object.values(x.conversations || {});
    if (cs.length && cs.every((c) => c.parked?.parking)) return 'parked';
  }
  return s;
}

export const statusText = (st) => t('st.' + st);

// currentCall picks the conversation a card shows: a connected one first,
// then the newest.
export function currentCall(x) {
  let best = null;
  for (const c of Object.values(x.conversations || {})) {
    if (!best || (c.connected && !best.connected) ||
        (c.connected === best.connected && (c.startTime || 0) > (best.startTime || 0))) best = c;
  }
  return best;
}

// talkSeconds is a conversation's talk time now, from its answer time
// (the server's clock, corrected) or, failing that, its duration.
export function talkSeconds(c) {
  if (c.answeredAt > 0) return (clock.now() - c.answeredAt) / 1000;
  return c.duration || 0;
}

// hidesItsCalls: the extension's own card hides whom it talks to (the
// server blanked its counterparts for this user).
function hidesItsCalls(exten) {
  const x = state.exts[exten];
  if (!x) return false;
  return Object.values(x.conversations || {}).some((c) => !c.counterpartNum && !c.counterpartName);
}

// peerText names the other party of conversation c on owner's card. It is
// never empty: a hidden or withheld number is "private number", a call
// still being dialled with no party yet is "dialling…". A card never names
// a colleague whose own card hides its calls (consistent redaction), unless
// the card is one of the user's own phones (the user is in that call).
export function peerText(c, owner) {
  const name = c.counterpartName || '', num = c.counterpartNum || '';
  if (!name && !num) {
    return !c.connected && c.direction !== 'in' ? t('peer.dialling') : t('peer.private');
  }
  // An originated leg (click-to-call, pickup, spy) shows the phone's own
  // number until it is bridged: never show a phone calling itself.
  if (owner && num === owner) {
    if (c.spy?.exten) return `${nameOf(c.spy.exten)} (${c.spy.exten})`;
    return c.connected ? t('peer.service') : t('peer.dialling');
  }
  if (num && owner && !myEndpoints().includes(owner) && num !== owner && hidesItsCalls(num)) {
    return t('peer.private');
  }
  if (name && num && name !== num) return `${name} (${num})`;
  return name || num;
}

// peerNumber is the number click-to-call may dial, '' when hidden.
export function peerNumber(c, owner) {
  return peerText(c, owner) === t('peer.private') ? '' : (c.counterpartNum || '');
}

// parkDeadline is when a parked call returns (server ms), or 0.
export function parkDeadline(c) {
  const p = c.parked;
  if (!p?.parking || !p.timeout) return 0;
  const since = state.parkings[p.parking]?.parkedCaller?.parkedAt || c.parkedSeen;
  return since ? since + p.timeout * 1000 : 0;
}

// convNote is what a conversation is doing beyond talking, '' for a plain
// call: parked (where, by whom, the time left), the role in an attended
// transfer, a spy session, a conference.
export function convNote(c) {
  if (c.parked?.parking) {
    const by = c.parked.by ? nameOf(c.parked.by) : '';
    let s = by ? t('conv.parkedBy', {parking: c.parked.parking, by}) : t('conv.parked', {parking: c.parked.parking});
    const end = parkDeadline(c);
    if (end) s += ', ' + t('conv.left', {time: fmtDuration(Math.max(0, (end - clock.now()) / 1000))});
    return s;
  }
  if (c.spy?.mode) {
    const who = c.spy.exten ? `${nameOf(c.spy.exten)} (${c.spy.exten})` : t('peer.private');
    return t('conv.spy.' + (['listen', 'whisper', 'barge'].includes(c.spy.mode) ? c.spy.mode : 'listen'), {who});
  }
  if (c.transfer?.state === 'consulting') {
    const role = ['transferer', 'transferee', 'target'].includes(c.transfer.role) ? c.transfer.role : 'transferee';
    return t('conv.xfer.' + role);
  }
  if (c.inConference) return t('conv.conf');
  return '';
}
