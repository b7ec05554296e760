// The extensions grid: one card per extension, built once and updated in
// place when that extension changes; durations tick locally once a second
// on the cards that show a call.

import {el, clock, fmtDuration} from './util.js';

export const STATUS_LABEL = {
  online: 'Available', ringing: 'Ringing', busy: 'Busy', busy_ringing: 'Busy, ringing',
  onhold: 'On hold', dnd: 'Do not disturb', offline: 'Offline',
};

// effectiveStatus folds the DND flag into the status an operator cares about.
export function effectiveStatus(x) {
  const s = x.status || 'offline';
  if (x.dnd && s === 'online') return 'dnd';
  return STATUS_LABEL[s] ? s : 'offline';
}

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

export function peerText(c) {
  const name = c.counterpartName || '', num = c.counterpartNum || '';
  if (name && num && name !== num) return `${name} (${num})`;
  return name || num || '';
}

export class Grid {
  // opts: onCall(exten), onDropTransfer(exten, data), nameOf(exten, x)
  constructor(root, opts) {
    this.root = root;
    this.opts = opts;
    this.cards = new Map(); // exten -> {li, parts, x}
    this.ticking = new Set();
    this.filter = {text: '', group: 'all'};
    this.groups = {}; // group value -> Set of extens (queues, mine)
    root.addEventListener('keydown', (e) => this.onKey(e));
    root.addEventListener('click', (e) => {
      const b = e.target.closest('button.call-btn');
      if (b) this.opts.onCall(b.closest('li').dataset.exten);
    });
    root.addEventListener('dragover', (e) => {
      if (e.target.closest('li.card') && e.dataTransfer.types.includes('application/x-ctibridge-call')) {
        e.preventDefault();
        e.dataTransfer.dropEffect = 'move';
        e.target.closest('li.card').classList.add('drop');
      }
    });
    root.addEventListener('dragleave', (e) => e.target.closest('li.card')?.classList.remove('drop'));
    root.addEventListener('drop', (e) => {
      const li = e.target.closest('li.card');
      if (!li) return;
      li.classList.remove('drop');
      const data = e.dataTransfer.getData('application/x-ctibridge-call');
      if (data) {
        e.preventDefault();
        this.opts.onDropTransfer(li.dataset.exten, JSON.parse(data));
      }
    });
    this.proto = el('li', {class: 'card', role: 'listitem', tabindex: '-1'},
      el('div', {class: 'card-head'},
        el('span', {class: 'dot', 'aria-hidden': 'true'}),
        el('span', {class: 'name'})),
      el('div', {class: 'card-sub'},
        el('span', {class: 'num'}),
        el('span', {class: 'card-state'})),
      el('div', {class: 'card-call'},
        el('span', {class: 'dir'}), el('span', {class: 'peer'}), el('span', {class: 'dur'})),
      el('button', {class: 'call-btn', type: 'button', tabindex: '-1'}, 'Call'));
  }

  // setAll replaces every extension (a snapshot).
  setAll(exts) {
    const keys = Object.keys(exts).sort((a, b) => a.localeCompare(b, undefined, {numeric: true}));
    const frag = document.createDocumentFragment();
    const old = this.cards;
    this.cards = new Map();
    this.ticking.clear();
    for (const k of keys) {
      let card = old.get(k);
      if (!card) card = this.make(k);
      this.cards.set(k, card);
      this.update(exts[k], card);
      frag.append(card.li);
    }
    this.root.replaceChildren(frag);
    this.applyFilter();
    this.ensureFocusable();
  }

  make(exten) {
    const li = this.proto.cloneNode(true);
    li.dataset.exten = exten;
    const q = (s) => li.querySelector(s);
    return {li, x: null, status: '', parts: {
      name: q('.name'), num: q('.num'), state: q('.card-state'), call: q('.card-call'),
      dir: q('.dir'), peer: q('.peer'), dur: q('.dur'), btn: q('.call-btn'),
    }};
  }

  // set adds or updates one extension (an extenUpdate event).
  set(x) {
    let card = this.cards.get(x.exten);
    if (!card) {
      card = this.make(x.exten);
      this.cards.set(x.exten, card);
      const after = [...this.cards.keys()].sort((a, b) => a.localeCompare(b, undefined, {numeric: true}));
      const next = after[after.indexOf(x.exten) + 1];
      this.root.insertBefore(card.li, next ? this.cards.get(next).li : null);
      this.update(x, card);
      this.applyFilter();
      this.ensureFocusable();
      return;
    }
    this.update(x, card);
    this.match(card);
  }

  update(x, card) {
    const p = card.parts;
    card.x = x;
    const st = effectiveStatus(x);
    const name = this.opts.nameOf(x.exten, x);
    if (p.name.textContent !== name) p.name.textContent = name;
    if (p.num.textContent !== x.exten) p.num.textContent = x.exten;
    if (card.status !== st) {
      card.li.classList.remove('st-' + card.status);
      card.li.classList.add('st-' + st);
      card.li.dataset.status = st;
      card.status = st;
      p.state.textContent = STATUS_LABEL[st];
    }
    const c = currentCall(x);
    card.conv = c;
    if (c) {
      p.call.hidden = false;
      p.dir.textContent = c.direction === 'in' ? '←' : '→';
      p.dir.title = c.direction === 'in' ? 'incoming' : 'outgoing';
      p.dir.setAttribute('aria-label', p.dir.title);
      p.peer.textContent = peerText(c) || (c.connected ? 'in a call' : '');
      if (c.connected) {
        this.ticking.add(card);
        p.dur.textContent = fmtDuration(talkSeconds(c));
      } else {
        this.ticking.delete(card);
        p.dur.textContent = '';
      }
    } else {
      p.call.hidden = true;
      this.ticking.delete(card);
      p.peer.textContent = '';
      p.dur.textContent = '';
    }
    const label = `Call ${name} ${x.exten}`;
    if (p.btn.getAttribute('aria-label') !== label) p.btn.setAttribute('aria-label', label);
    card.li.setAttribute('aria-label', `${name}, ${x.exten}, ${STATUS_LABEL[st]}${c ? ', ' + (peerText(c) || 'in a call') : ''}`);
  }

  tick() {
    for (const card of this.ticking) {
      card.parts.dur.textContent = fmtDuration(talkSeconds(card.conv));
    }
  }

  setGroups(groups) { this.groups = groups; this.applyFilter(); }

  setFilter(f) {
    Object.assign(this.filter, f);
    this.applyFilter();
  }

  match(card) {
    const {text, group} = this.filter;
    let ok = true;
    if (group === 'available') ok = card.status === 'online';
    else if (group === 'busy') ok = ['busy', 'busy_ringing', 'ringing', 'onhold'].includes(card.status);
    else if (group === 'offline') ok = card.status === 'offline';
    else if (group !== 'all') ok = this.groups[group]?.has(card.li.dataset.exten) ?? false;
    if (ok && text) {
      const hay = (card.parts.name.textContent + ' ' + card.li.dataset.exten + ' ' + card.parts.peer.textContent).toLowerCase();
      ok = hay.includes(text);
    }
    card.li.hidden = !ok;
    return ok;
  }

  applyFilter() {
    let n = 0;
    for (const card of this.cards.values()) if (this.match(card)) n++;
    this.visible = n;
    this.opts.onCount?.(n, this.cards.size);
    this.ensureFocusable();
  }

  visibleCards() { return [...this.root.children].filter((li) => !li.hidden); }

  // Roving tabindex: exactly one visible card is in the tab order.
  ensureFocusable() {
    const cur = this.root.querySelector('li.card[tabindex="0"]');
    if (cur && !cur.hidden) return;
    cur?.setAttribute('tabindex', '-1');
    const first = this.visibleCards()[0];
    first?.setAttribute('tabindex', '0');
  }

  onKey(e) {
    const li = e.target.closest('li.card');
    if (!li || e.target !== li) return;
    const cards = this.visibleCards();
    const i = cards.indexOf(li);
    let cols = 1;
    while (cols < cards.length && cards[cols].offsetTop === cards[0].offsetTop) cols++;
    let j = -1;
    switch (e.key) {
      case 'ArrowRight': j = i + 1; break;
      case 'ArrowLeft': j = i - 1; break;
      case 'ArrowDown': j = i + cols; break;
      case 'ArrowUp': j = i - cols; break;
      case 'Home': j = 0; break;
      case 'End': j = cards.length - 1; break;
      case 'Enter': case ' ':
        e.preventDefault();
        this.opts.onCall(li.dataset.exten);
        return;
      case 't': case 'T':
        e.preventDefault();
        this.opts.onKeyTransfer?.(li.dataset.exten);
        return;
      default: return;
    }
    e.preventDefault();
    j = Math.max(0, Math.min(cards.length - 1, j));
    li.setAttribute('tabindex', '-1');
    cards[j].setAttribute('tabindex', '0');
    cards[j].focus();
  }

  get(exten) { return this.cards.get(exten)?.x; }
}
