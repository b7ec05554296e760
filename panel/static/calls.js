// The own calls bar: the conversations of the user's endpoints, with the
// actions the user may take on them, and drag-and-drop transfer onto the
// grid.

import {el, fmtDuration, toast} from './util.js';
import {api} from './api.js';
import {t} from './i18n.js';
import {state, can, myEndpoints} from './state.js';
import {peerText, talkSeconds, convNote} from './describe.js';
import {refuseTarget} from './safety.js';

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
    const key = JSON.stringify(calls.map((c) => [c.endpoint, c.conv.id, c.conv.connected, c.conv.recording, peerText(c.conv, c.endpoint),
      c.conv.direction, c.conv.transfer, c.conv.parked, c.conv.spy, c.conv.inConference]));
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
    const peer = peerText(conv, endpoint);
    // act runs one action on this call; what names it in the message.
    const act = (path, extra, what) => async () => {
      try {
        await api.post('/astproxy/' + path, {convid: conv.id, endpointId: endpoint, ...extra});
        toast(t('msg.done', {what}));
      } catch (e) {
        toast(t('msg.failed', {what, why: e.message}), 'error');
      }
    };
    const to = el('input', {type: 'text', inputmode: 'tel', class: 'xfer-to', 'data-role': 'to', placeholder: t('h.number'),
      'aria-label': t('msg.typeNumber'), autocomplete: 'off'});
    const xfer = (path) => async () => {
      const n = to.value.trim();
      if (!n) { to.focus(); toast(t('msg.typeNumber'), 'error'); return; }
      const why = path === 'blindtransfer' && refuseTarget(n);
      if (why) { toast(why, 'error'); return; }
      await act(path, {to: n}, t(path === 'atxfer' ? 'msg.atxferTo' : 'msg.xferTo', {to: n}))();
    };
    const dir = conv.direction === 'in' ? 'in' : 'out';
    const note = convNote(conv);
    const li = el('li', {class: 'call-row' + (conv.connected ? ' connected' : ' ringing'), 'data-convid': conv.id, draggable: can('transfer') ? 'true' : null},
      el('span', {class: 'dir', 'aria-label': t('dir.' + dir), title: t('dir.' + dir)}, dir === 'in' ? '←' : '→'),
      el('span', {class: 'peer'}, peer),
      el('span', {class: 'via'}, endpoint),
      el('span', {class: 'state'}, note || (conv.connected ? '' : t('st.ringing'))),
      dur,
      el('span', {class: 'call-actions'}, ...this.buttons(conv, act, xfer, to)));
    to.addEventListener('keydown', (e) => { if (e.key === 'Enter') xfer('blindtransfer')(); });
    li.addEventListener('dragstart', (e) => {
      e.dataTransfer.setData('application/x-ctibridge-call', JSON.stringify({convid: conv.id, endpointId: endpoint}));
      e.dataTransfer.effectAllowed = 'move';
    });
    this.rows.push({dur, conv});
    return li;
  }

  // buttons are the actions on one of the user's own calls, each only
  // when /user/me allows it.
  buttons(conv, act, xfer, to) {
    const b = (role, key, run, extra = {}) => el('button', {type: 'button', 'data-role': role, onclick: run, ...extra}, t(key));
    const up = conv.connected;
    const xf = conv.transfer;
    const out = [can('hangup') && b('hangup', 'act.hangup', act('hangup', {}, t('act.hangup')), {class: 'danger'})];
    if (xf?.state === 'consulting' && xf.role === 'transferer' && can('transfer')) {
      // Complete only once the target answered: both of the transfer's
      // calls (the held one and the consult one) are then connected. While
      // the target rings the button waits, so no one is handed to a phone
      // that may never answer.
      const legs = this.myCalls().filter((c) => c.conv.transfer?.id === xf.id);
      const answered = legs.length > 1 && legs.every((c) => c.conv.connected);
      out.push(b('complete', 'act.complete', act('atxfer_complete', {}, t('act.complete')),
        answered ? {class: 'primary'} : {class: 'primary', disabled: '', title: t('act.completeWait')}),
      b('cancel', 'act.cancel', act('atxfer_cancel', {}, t('act.cancel'))));
      return out;
    }
    if (up && can('transfer')) {
      out.push(to, b('blind', 'act.transfer', xfer('blindtransfer')), b('atxfer', 'act.atxfer', xfer('atxfer')));
    }
    if (up && can('park')) out.push(b('park', 'act.park', act('park', {}, t('act.park'))));
    if (up && can('record')) {
      const rec = conv.recording === 'true', muted = conv.recording === 'mute';
      if (!rec && !muted) out.push(b('rec', 'act.record', act('start_record', {}, t('act.record')), {'aria-pressed': 'false'}));
      if (rec) out.push(b('muterec', 'act.mute', act('mute_record', {}, t('act.mute'))));
      if (muted) out.push(b('unmuterec', 'act.unmute', act('unmute_record', {}, t('act.unmute'))));
      if (rec || muted) out.push(b('stoprec', 'act.stoprec', act('stop_record', {}, t('act.stoprec')), {'aria-pressed': 'true'}));
    }
    return out;
  }

  tick() {
    for (const r of this.rows) r.dur.textContent = r.conv.connected ? fmtDuration(talkSeconds(r.conv)) : '';
  }
}
