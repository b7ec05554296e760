// Trunks: registration, channels in use and the live calls through each,
// from the trunks collection of the snapshot and trunkConversations events
// (trunkUpdate from a server without deltas).

import {el, fmtDuration, numberButton, applyDelta} from './util.js';
import {t} from './i18n.js';
import {state} from './state.js';
import {peerText, peerNumber, talkSeconds} from './describe.js';

const byNum = (a, b) => a.localeCompare(b, undefined, {numeric: true});

// registration maps the PBX's words to plain ones: registered, not
// registered (rejected, failed...), or none (a trunk that does not
// register, authenticated by its address: "unmonitored").
function registration(tr) {
  const r = (tr.registration || '').toLowerCase();
  if (r === 'registered') return 'registered';
  if (r === '' || r === 'unmonitored') return 'noreg';
  return 'unregistered';
}

// applyTrunkDelta applies a trunkConversations event to trunks: the
// trunk's fields replaced, its conversations set and removed.
export const applyTrunkDelta = (trunks, d) => applyDelta(trunks, d, 'name', 'conversations');

export class TrunksView {
  // onCall(number): click-to-call the other party of a trunk call.
  constructor(root, onCall) {
    this.root = root;
    this.onCall = onCall;
    this.durs = []; // [span, conv]
  }

  render() {
    const names = Object.keys(state.trunks).sort(byNum);
    this.durs = [];
    if (!names.length) {
      this.root.replaceChildren(el('p', {class: 'muted'}, t('tr.none')));
      return;
    }
    const rows = names.map((n) => {
      const tr = state.trunks[n];
      const convs = Object.values(tr.conversations || {});
      const reg = registration(tr);
      const calls = convs.map((c) => {
        const d = el('span', {class: 'dur'}, c.connected ? fmtDuration(talkSeconds(c)) : '');
        if (c.connected) this.durs.push([d, c]);
        return el('li', null, el('span', {class: 'dir', 'aria-label': t('dir.' + (c.direction === 'in' ? 'in' : 'out'))}, c.direction === 'in' ? '←' : '→'),
          ' ', numberButton(peerText(c, ''), peerNumber(c, ''), this.onCall, t('act.callBack', {number: peerNumber(c, '')})), ' ', d);
      });
      return el('tr', {'data-trunk': tr.name},
        el('th', {scope: 'row'}, tr.name),
        el('td', {class: 'reg reg-' + reg}, t('tr.' + reg)),
        el('td', {class: 'numeric chans'}, String(convs.length)),
        el('td', null, calls.length ? el('ul', {class: 'trunk-calls'}, ...calls) : el('span', {class: 'muted'}, t('tr.noCalls'))));
    });
    this.root.replaceChildren(el('table', {class: 'table'},
      el('thead', null, el('tr', null, ...['tr.name', 'tr.reg', 'tr.channels', 'tr.calls'].map((k) => el('th', {scope: 'col'}, t(k))))),
      el('tbody', null, ...rows)));
  }

  tick() {
    for (const [span, c] of this.durs) span.textContent = fmtDuration(talkSeconds(c));
  }
}
