// Actions on a colleague's card (the ⋯ button, M or the context-menu key
// on a focused card): pick up a ringing call, hang up, listen, intrude,
// park, record, transfer one's own call here, forward the colleague's calls. Each shows only when
// /user/me allows it on that extension (actions and scope) and the call is
// in a state where it makes sense; the PBX's refusals come back in plain
// words (errors.js).

import {el, toast} from './util.js';
import {api} from './api.js';
import {t} from './i18n.js';
import {state, can, inScope, myEndpoints, nameOf} from './state.js';
import {currentCall, peerNumber} from './describe.js';
import {watchPickup} from './safety.js';

// cardActions lists [label, role, run] for extension exten, given the
// user's active call (for "transfer my call here") and how to place a
// call (for "call the other party").
export function cardActions(exten, active, transfer, call) {
  const x = state.exts[exten];
  if (!x) return [];
  const c = currentCall(x);
  const mine = myEndpoints().includes(exten);
  const dest = myEndpoints()[0];
  const scope = inScope(exten);
  const post = (path, body, done, then) => async () => {
    try {
      await api.post('/astproxy/' + path, body);
      toast(t('msg.done', {what: done}));
      then?.();
    } catch (e) {
      toast(t('msg.failed', {what: done, why: e.message}), 'error');
    }
  };
  const conv = c ? {convid: c.id, endpointId: exten} : null;
  const out = [];
  const add = (ok, key, role, run) => { if (ok) out.push([t(key), role, run]); };
  const ringing = c && !c.connected && c.direction === 'in';
  add(ringing && !mine && dest && can('pickup') && scope, 'act.pickup', 'pickup',
    post('pickup_conv', {endpointId: exten, destId: dest}, t('act.pickup'), () => watchPickup(exten, dest)));
  add(c && can('hangup') && scope, 'act.hangup', 'hangup', post('hangup', conv, t('act.hangup')));
  const talking = c && c.connected && !c.parked?.parking;
  add(talking && !mine && dest && can('spy') && scope, 'act.spy', 'spy',
    post('start_spy', {...conv, destId: dest}, t('act.spy')));
  // Whisper (ChanSpy's w: heard by the colleague only) with intrude's
  // permission, as the server checks it.
  add(talking && !mine && dest && can('intrude') && scope, 'act.whisper', 'whisper',
    post('whisper', {...conv, destId: dest}, t('act.whisper')));
  add(talking && !mine && dest && can('intrude') && scope, 'act.intrude', 'intrude',
    post('intrude', {...conv, destId: dest}, t('act.intrude')));
  add(talking && can('park') && scope, 'act.park', 'park', post('park', conv, t('act.park')));
  if (talking && can('record') && scope) {
    const rec = c.recording === 'true', muted = c.recording === 'mute';
    if (!rec && !muted) add(true, 'act.record', 'rec', post('start_record', conv, t('act.record')));
    if (rec) add(true, 'act.mute', 'muterec', post('mute_record', conv, t('act.mute')));
    if (muted) add(true, 'act.unmute', 'unmuterec', post('unmute_record', conv, t('act.unmute')));
    if (rec || muted) add(true, 'act.stoprec', 'stoprec', post('stop_record', conv, t('act.stoprec')));
  }
  add(active && !mine && can('transfer'), 'act.xferHere', 'xferhere', () => transfer(active, exten));
  // Or to the colleague's voicemail box, or mobile (the server knows the
  // number; /user/me lists who has one).
  add(active && !mine && can('transfer') && !!x.voicemail, 'act.xferVm', 'xfervm',
    post('transfer_voicemail', {...active, to: exten}, t('act.xferVm')));
  add(active && !mine && can('transfer') && !!state.me?.mobiles?.includes(exten), 'act.xferMobile', 'xfermobile',
    post('transfer_cellphone', {...active, to: exten}, t('act.xferMobile')));
  // DND for a colleague one may act for (one's own is in the top bar).
  add(!mine && can('dnd') && scope && x.status !== 'offline', x.dnd ? 'act.dndOff' : 'act.dndOn', x.dnd ? 'dndoff' : 'dndon',
    post('dnd', {endpointId: exten, activate: !x.dnd}, t(x.dnd ? 'act.dndOff' : 'act.dndOn')));
  // Forward a colleague's calls (the number is asked in the menu), or
  // stop forwarding them.
  const fwd = !mine && can('call_forward') && scope;
  add(fwd && !x.cf, 'act.cfOn', 'cfon', null);
  add(fwd && !!x.cf, 'act.cfOff', 'cfoff', post('cfcall', {endpointId: exten, type: 'unconditional'}, t('act.cfOff')));
  // Click-to-call the other party when the card shows its number.
  const other = c ? peerNumber(c, exten) : '';
  if (other && other !== exten && can('call') && dest) out.push([t('act.callBack', {number: other}), 'callpeer', () => call(other)]);
  return out;
}

// CardMenu is the one pop-up menu of card actions.
export class CardMenu {
  // opts: active() -> {convid, endpointId} | null, transfer(data, to), call(number)
  constructor(opts) {
    this.opts = opts;
    this.root = el('div', {id: 'card-menu', class: 'card-menu', role: 'menu', hidden: true});
    document.body.append(this.root);
    this.root.addEventListener('keydown', (e) => this.onKey(e));
    document.addEventListener('pointerdown', (e) => {
      if (!this.root.hidden && !this.root.contains(e.target) && !e.target.closest('.menu-btn')) this.close(false);
    });
  }

  open(exten, anchor) {
    const acts = cardActions(exten, this.opts.active(), this.opts.transfer, this.opts.call);
    this.exten = exten;
    this.anchor = anchor;
    const title = el('p', {class: 'menu-title'}, `${nameOf(exten)} (${exten})`);
    // An action without run asks for a number first (forward).
    const items = acts.map(([label, role, run]) => el('button', {type: 'button', role: 'menuitem', tabindex: '-1', 'data-role': role,
      onclick: () => { if (!run) { this.askForward(exten); return; } this.close(true); run(); }}, label));
    this.root.replaceChildren(title, ...(items.length ? items : [el('p', {class: 'muted'}, t('act.none'))]),
      el('button', {type: 'button', role: 'menuitem', tabindex: '-1', class: 'link', 'data-role': 'close', onclick: () => this.close(true)}, t('act.close')));
    this.root.setAttribute('aria-label', t('card.actionsLabel', {name: nameOf(exten), exten}));
    this.root.hidden = false;
    const r = anchor.getBoundingClientRect();
    const w = this.root.offsetWidth, h = this.root.offsetHeight;
    this.root.style.left = Math.max(4, Math.min(innerWidth - w - 4, r.right - w)) + 'px';
    this.root.style.top = Math.max(4, r.bottom + h + 4 > innerHeight ? r.top - h - 4 : r.bottom + 4) + 'px';
    anchor.setAttribute('aria-expanded', 'true');
    this.root.querySelector('[role="menuitem"]')?.focus();
  }

  // askForward turns the menu into a one-field form: the number to
  // forward exten's calls to (cfcall, unconditional).
  askForward(exten) {
    const input = el('input', {id: 'card-menu-cf', type: 'tel', inputmode: 'tel', autocomplete: 'off', placeholder: t('me.cf')});
    const send = async () => {
      const to = input.value.trim();
      if (!to) { input.focus(); return; }
      this.close(true);
      const what = t('act.cfTo', {name: nameOf(exten), to});
      try {
        await api.post('/astproxy/cfcall', {endpointId: exten, type: 'unconditional', to});
        toast(t('msg.done', {what}));
      } catch (e) {
        toast(t('msg.failed', {what, why: e.message}), 'error');
      }
    };
    input.addEventListener('keydown', (e) => { if (e.key === 'Enter') { e.preventDefault(); send(); } });
    this.root.replaceChildren(el('p', {class: 'menu-title'}, `${nameOf(exten)} (${exten})`),
      el('label', {for: 'card-menu-cf'}, t('act.cfNumber', {name: nameOf(exten)})), input,
      el('button', {type: 'button', role: 'menuitem', tabindex: '-1', 'data-role': 'cfsend', onclick: send}, t('me.cf.set')),
      el('button', {type: 'button', role: 'menuitem', tabindex: '-1', class: 'link', 'data-role': 'close', onclick: () => this.close(true)}, t('act.close')));
    input.focus();
  }

  close(refocus) {
    if (this.root.hidden) return;
    this.root.hidden = true;
    this.anchor?.setAttribute('aria-expanded', 'false');
    if (refocus) document.querySelector(`#grid li[data-exten="${CSS.escape(this.exten)}"]`)?.focus();
  }

  onKey(e) {
    const items = [...this.root.querySelectorAll('[role="menuitem"]')];
    const i = items.indexOf(document.activeElement);
    // The forward number's field keeps its own keys (Home, End, arrows).
    if (e.target.matches('input') && !['Escape', 'Tab'].includes(e.key)) return;
    if (e.key === 'Escape') { e.preventDefault(); e.stopPropagation(); this.close(true); return; }
    let j = -1;
    if (e.key === 'ArrowDown') j = (i + 1) % items.length;
    if (e.key === 'ArrowUp') j = (i + items.length - 1) % items.length;
    if (e.key === 'Home') j = 0;
    if (e.key === 'End') j = items.length - 1;
    if (e.key === 'Tab') { e.preventDefault(); j = (i + (e.shiftKey ? items.length - 1 : 1)) % items.length; }
    if (j >= 0) { e.preventDefault(); items[j].focus(); }
  }
}
