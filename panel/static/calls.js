// The own calls bar: the conversations of the user's endpoints, with the
// actions the user may take on them, and drag-and-drop transfer onto the
// grid.

import {el, fmtDuration, toast} from './util.js';
import {api} from './api.js';
import {state, can, myEndpoints} from './state.js';
import {peerText, talkSeconds} from './grid.js';

export class CallsBar {
  constructor(root) {
    this.root = root;
    this.rows = [];
    this.key = '';
  }

  // myCalls lists [{endpoint, conv}] of the user's endpoints.
  myCalls() {
    const out = [];
    for (const e of myEndpoints()) {
      const x = state.exts[e];
      for (const c of Object.values(x?.conversations || {})) out.push({endpoint: e, conv: c});
    }
    out.sort((a, b) => (a.conv.startTime || 0) - (b.conv.startTime || 0));
    return out;
  }

  // active is the call a transfer from the grid applies to: the first
  // connected one.
  active() {
    return this.myCalls().find((c) => c.conv.connected) || null;
  }

  render() {
    const calls = this.myCalls();
    // Rebuild only when the set of calls or their state changed: the
    // transfer box must keep its focus and text while durations tick.
    const key = JSON.stringify(calls.map((c) => [c.endpoint, c.conv.id, c.conv.connected, c.conv.recording, peerText(c.conv), c.conv.direction]));
    if (key === this.key) {
      calls.forEach((c, i) => { this.rows[i].conv = c.conv; });
      this.tick();
      return;
    }
    this.key = key;
    const list = this.root.querySelector('.calls-list');
    const focusedId = document.activeElement?.closest?.('.call-row')?.dataset.convid;
    const focusedSel = document.activeElement?.dataset?.role;
    this.rows = [];
    list.replaceChildren(...calls.map((c) => this.row(c)));
    this.root.classList.toggle('empty', calls.length === 0);
    this.root.querySelector('.calls-empty').hidden = calls.length > 0;
    if (focusedId) {
      this.root.querySelector(`.call-row[data-convid="${CSS.escape(focusedId)}"] [data-role="${focusedSel}"]`)?.focus();
    }
  }

  row({endpoint, conv}) {
    const dur = el('span', {class: 'dur'});
    const peer = peerText(conv) || 'unknown';
    const act = (path, extra, msg) => async () => {
      try {
        await api.post('/astproxy/' + path, {convid: conv.id, endpointId: endpoint, ...extra});
        if (msg) toast(msg);
      } catch (e) {
        toast(`${path}: ${e.message}`, 'error');
      }
    };
    const to = el('input', {type: 'text', inputmode: 'tel', class: 'xfer-to', 'data-role': 'to', placeholder: 'Number',
      'aria-label': `Transfer ${peer} to number`, autocomplete: 'off'});
    const xfer = (path) => async () => {
      const n = to.value.trim();
      if (!n) { to.focus(); toast('Type the number to transfer to', 'error'); return; }
      await act(path, {to: n}, `Transferring to ${n}`)();
    };
    const recording = conv.recording === 'true' || conv.recording === 'mute';
    const li = el('li', {class: 'call-row' + (conv.connected ? ' connected' : ' ringing'), 'data-convid': conv.id, draggable: can('transfer') ? 'true' : null},
      el('span', {class: 'dir', 'aria-label': conv.direction === 'in' ? 'incoming' : 'outgoing', title: conv.direction === 'in' ? 'incoming' : 'outgoing'}, conv.direction === 'in' ? '←' : '→'),
      el('span', {class: 'peer'}, peer),
      el('span', {class: 'via'}, `on ${endpoint}`),
      el('span', {class: 'state'}, conv.connected ? '' : 'ringing'),
      dur,
      el('span', {class: 'call-actions'},
        can('hangup') && el('button', {type: 'button', class: 'danger', 'data-role': 'hangup', onclick: act('hangup', {}, 'Hung up')}, 'Hang up'),
        can('transfer') && conv.connected && to,
        can('transfer') && conv.connected && el('button', {type: 'button', 'data-role': 'blind', onclick: xfer('blindtransfer')}, 'Transfer'),
        can('transfer') && conv.connected && el('button', {type: 'button', 'data-role': 'atxfer', onclick: xfer('atxfer')}, 'Attended'),
        can('park') && conv.connected && el('button', {type: 'button', 'data-role': 'park', onclick: act('park', {}, 'Parked')}, 'Park'),
        can('record') && conv.connected && (recording
          ? el('button', {type: 'button', 'data-role': 'stoprec', 'aria-pressed': 'true', onclick: act('stop_record', {}, 'Recording stopped')}, 'Stop recording')
          : el('button', {type: 'button', 'data-role': 'rec', 'aria-pressed': 'false', onclick: act('start_record', {}, 'Recording')}, 'Record'))));
    to.addEventListener('keydown', (e) => { if (e.key === 'Enter') xfer('blindtransfer')(); });
    li.addEventListener('dragstart', (e) => {
      e.dataTransfer.setData('application/x-ctibridge-call', JSON.stringify({convid: conv.id, endpointId: endpoint}));
      e.dataTransfer.effectAllowed = 'move';
    });
    this.rows.push({dur, conv});
    return li;
  }

  tick() {
    for (const r of this.rows) r.dur.textContent = r.conv.connected ? fmtDuration(talkSeconds(r.conv)) : '';
  }
}
