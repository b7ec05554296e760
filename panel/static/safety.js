// Safe transfers and pickups: a blind transfer is refused, before it is
// sent, when its target is an extension that cannot take the call
// (offline, do not disturb) or a number shaped like an extension that
// does not exist; a pickup that did not happen (the call was answered
// elsewhere or ended before the user's phone took it, or that phone did
// not answer) is said so, not left silent.

import {t} from './i18n.js';
import {state, nameOf} from './state.js';
import {toast} from './util.js';

// refuseTarget is why a blind transfer to `to` would lose the caller, in
// words, or '' when it may go.
export function refuseTarget(to) {
  const x = state.exts[to];
  const name = x ? `${nameOf(to)} (${to})` : to;
  if (x) {
    if (x.status === 'offline' || !x.status) return t('xfer.offline', {name});
    if (x.dnd || x.status === 'dnd') return t('xfer.dnd', {name});
    return '';
  }
  return looksInternal(to) ? t('xfer.unknown', {to}) : '';
}

// looksInternal: digits only, as long as the PBX's extensions and with
// the same first digit as one of them, and no queue or parking space
// answers it (600, 701): then it was meant for an extension.
function looksInternal(to) {
  if (!/^[0-9]+$/.test(to)) return false;
  if (Object.values(state.queues).some((q) => q.queue === to || q.number === to) || state.parkings[to]) return false;
  return Object.keys(state.exts).some((e) => e.length === to.length && e[0] === to[0]);
}

// A pickup being watched: the rung extension, the user's phone that
// picks up, the calls each had before, whether the user's phone got a new
// one, and the timers.
let watch = null;
const GIVE_UP = 40000; // ms: the pickup's Originate rings the phone for 30 s
const GRACE = 5000; // ms: the call left the rung phone; the user's should have it by then

const ids = (exten, connected) => new Set(Object.values(state.exts[exten]?.conversations || {})
  .filter((c) => !connected || c.connected).map((c) => c.id));

// watchPickup follows a pickup the PBX accepted (pickup_conv answered
// 200) until the user's phone is connected, or says it failed: the call
// was answered on the rung phone, or it left it and the user's phone
// did not get it, or that phone never answered.
export function watchPickup(target, dest) {
  done();
  watch = {target, dest, before: ids(dest), talking: ids(target, true), seen: false, grace: 0,
    timer: setTimeout(() => failed('pickup.noAnswer'), GIVE_UP)};
}

// pickupUpdate looks at the watched pickup after an extension changed.
export function pickupUpdate(exten) {
  const w = watch;
  if (!w || (exten !== w.dest && exten !== w.target)) return;
  const fresh = Object.values(state.exts[w.dest]?.conversations || {}).filter((c) => !w.before.has(c.id));
  if (fresh.some((c) => c.connected)) { done(); return; }
  if (fresh.length) w.seen = true;
  else if (w.seen) { failed('pickup.failed'); return; } // the user's new call ended, never connected
  const there = Object.values(state.exts[w.target]?.conversations || {});
  // Answered on the rung phone (a call connected there since, not with us).
  if (there.some((c) => c.connected && !w.talking.has(c.id) && c.counterpartNum !== w.dest)) { failed('pickup.failed'); return; }
  // Gone from the rung phone: ours must have it soon.
  if (!there.some((c) => !c.connected) && !w.grace) w.grace = setTimeout(() => failed('pickup.failed'), GRACE);
}

function failed(key) {
  if (!watch) return;
  const name = `${nameOf(watch.target)} (${watch.target})`;
  done();
  toast(t(key, {name}), 'error');
}

function done() {
  clearTimeout(watch?.timer);
  clearTimeout(watch?.grace);
  watch = null;
}
