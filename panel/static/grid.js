// The extensions grid: one card per extension, built once and updated in
// place when that extension changes; durations and parking countdowns
// tick locally once a second on the cards that show a call.

import {el, fmtDuration} from './util.js';
import {t} from './i18n.js';
import {state} from './state.js';
import {effectiveStatus, statusText, currentCall, talkSeconds, peerText, convNote} from './describe.js';

const byNum = (a, b) => a.localeCompare(b, undefined, {numeric: true});

// VOICEMAIL is FreePBX's forward target for "to voicemail" (vmu201, *201).
const VOICEMAIL = /^(vm[ubsi]|\*)\d+$/;

// indicators are the small badges of a card: DND, forwards, voicemail,
// presence; each [class, short text, long text] and only when present.
function indicators(x) {
  const out = [];
  if (x.dnd) out.push(['ind-dnd', t('ind.dnd'), t('ind.dnd.long')]);
  for (const [k, key] of [['cf', 'ind.cf'], ['cfb', 'ind.cfb'], ['cfu', 'ind.cfu']]) {
    if (!x[k]) continue;
    // FreePBX's forward to voicemail ("vmu201", "*201") in words.
    const to = VOICEMAIL.test(x[k]) ? t('ind.vmbox') : x[k];
    out.push(['ind-cf', (k === 'cf' ? '→ ' : k === 'cfb' ? '→b ' : '→u ') + to, t(key, {to})]);
  }
  const rec = currentCall(x)?.recording;
  if (rec === 'true') out.push(['ind-rec', t('ind.rec'), t('ind.rec.long')]);
  if (rec === 'mute') out.push(['ind-rec', t('ind.recPaused'), t('ind.recPaused.long')]);
  const vm = x.voicemail;
  if (vm && vm.new > 0) out.push(['ind-vm', '✉ ' + vm.new, t('ind.vm', {n: vm.new})]);
  const pres = state.presence?.[x.exten];
  const shown = {dnd: x.dnd, callforward: x.cf, voicemail: VOICEMAIL.test(x.cf || ''), online: true};
  if (pres && !shown[pres]) out.push(['ind-pres', t('pres.' + pres), t('pres.' + pres)]);
  return out;
}

export class Grid {
  // opts: onCall(exten), onDropTransfer(exten, data), onKeyTransfer(exten),
  // onMenu(exten, anchor), nameOf(exten, x), onCount(n, total)
  constructor(root, opts) {
    this.root = root;
    this.opts = opts;
    this.cards = new Map(); // exten -> {li, parts, x}
    this.ticking = new Set();
    this.filter = {text: '', group: 'all'};
    this.groups = {}; // group value -> Set of extens (queues, mine)
    root.addEventListener('keydown', (e) => this.onKey(e));
    root.addEventListener('click', (e) => {
      const b = e.target.closest('button');
      if (!b) return;
      const li = b.closest('li');
      if (b.classList.contains('call-btn')) this.opts.onCall(li.dataset.exten);
      if (b.classList.contains('menu-btn')) this.opts.onMenu(li.dataset.exten, b);
    });
    this.setupDrop(root);
    this.proto = el('li', {class: 'card', role: 'listitem', tabindex: '-1'},
      el('div', {class: 'card-head'},
        el('span', {class: 'dot', 'aria-hidden': 'true'}),
        el('span', {class: 'name'})),
      el('div', {class: 'card-sub'},
        el('span', {class: 'num'}),
        el('span', {class: 'card-state'}),
        el('span', {class: 'inds'})),
      el('div', {class: 'card-call'},
        el('span', {class: 'dir'}), el('span', {class: 'peer'}), el('span', {class: 'dur'})),
      el('div', {class: 'card-note'}),
      el('div', {class: 'card-more', hidden: true}),
      el('span', {class: 'card-btns'},
        el('button', {class: 'call-btn', type: 'button', tabindex: '-1'}),
        el('button', {class: 'menu-btn', type: 'button', tabindex: '-1', 'aria-haspopup': 'menu'}, '⋯')));
  }

  setupDrop(root) {
    const MIME = 'application/x-ctibridge-call';
    root.addEventListener('dragover', (e) => {
      const li = e.target.closest('li.card');
      if (li && e.dataTransfer.types.includes(MIME)) {
        e.preventDefault();
        e.dataTransfer.dropEffect = 'move';
        li.classList.add('drop');
      }
    });
    root.addEventListener('dragleave', (e) => e.target.closest('li.card')?.classList.remove('drop'));
    root.addEventListener('drop', (e) => {
      const li = e.target.closest('li.card');
      if (!li) return;
      li.classList.remove('drop');
      const data = e.dataTransfer.getData(MIME);
      if (data) {
        e.preventDefault();
        this.opts.onDropTransfer(li.dataset.exten, JSON.parse(data));
      }
    });
  }

  // setAll replaces every extension (a snapshot).
  setAll(exts) {
    const keys = Object.keys(exts).sort(byNum);
    const frag = document.createDocumentFragment();
    const old = this.cards;
    this.cards = new Map();
    this.ticking.clear();
    for (const k of keys) {
      const card = old.get(k) || this.make(k);
      this.cards.set(k, card);
      this.update(exts[k], card);
      frag.append(card.li);
    }
    this.root.replaceChildren(frag);
    this.applyFilter();
  }

  make(exten) {
    const li = this.proto.cloneNode(true);
    li.dataset.exten = exten;
    const q = (s) => li.querySelector(s);
    return {li, x: null, status: '', sig: '', parts: {
      name: q('.name'), num: q('.num'), state: q('.card-state'), inds: q('.inds'), call: q('.card-call'),
      dir: q('.dir'), peer: q('.peer'), dur: q('.dur'), note: q('.card-note'), more: q('.card-more'), btn: q('.call-btn'), menu: q('.menu-btn'),
    }};
  }

  // set adds or updates one extension (an extenUpdate event).
  set(x) {
    let card = this.cards.get(x.exten);
    if (!card) {
      card = this.make(x.exten);
      this.cards.set(x.exten, card);
      const after = [...this.cards.keys()].sort(byNum);
      const next = after[after.indexOf(x.exten) + 1];
      this.root.insertBefore(card.li, next ? this.cards.get(next).li : null);
      this.update(x, card);
      this.applyFilter();
      return;
    }
    this.update(x, card);
    this.match(card);
  }

  // refresh re-renders every card from its last data (language switch, or
  // another card's redaction changed what this one may name).
  refresh() {
    for (const card of this.cards.values()) {
      card.sig = '';
      card.inds = null;
      if (card.status) card.parts.state.textContent = card.parts.call.dataset.st = statusText(card.status);
      this.update(card.x, card);
    }
  }

  update(x, card) {
    if (!x) return;
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
      // The status in words beside the colour in every mode: compact
      // cards show it before the call (style.css), from this attribute.
      p.state.textContent = p.call.dataset.st = statusText(st);
    }
    this.updateInds(x, card);
    const c = currentCall(x);
    card.conv = c;
    if (card.li.classList.contains('in-call') !== !!c) card.li.classList.toggle('in-call', !!c);
    let peer = '';
    if (c) {
      peer = peerText(c, x.exten);
      p.call.hidden = false;
      const dir = c.direction === 'in' ? 'in' : 'out';
      p.dir.textContent = dir === 'in' ? '←' : '→';
      p.dir.title = t('dir.' + dir);
      p.dir.setAttribute('aria-label', p.dir.title);
      if (p.peer.textContent !== peer) p.peer.textContent = peer;
      p.note.textContent = convNote(c);
      p.note.hidden = !p.note.textContent;
      if (c.connected || c.parked?.parking) this.ticking.add(card);
      else this.ticking.delete(card);
      p.dur.textContent = c.connected ? fmtDuration(talkSeconds(c)) : '';
      this.more(x, c, p);
    } else {
      p.call.hidden = true;
      p.note.hidden = true;
      p.more.hidden = true;
      this.ticking.delete(card);
      p.peer.textContent = '';
      p.dur.textContent = '';
    }
    const more = p.more.hidden ? '' : p.more.textContent;
    const sig = name + '|' + peer + '|' + st + '|' + p.inds.textContent + '|' + more;
    if (card.sig !== sig) {
      card.sig = sig;
      p.btn.textContent = t('card.call');
      p.btn.setAttribute('aria-label', t('card.callLabel', {name, exten: x.exten}));
      p.menu.setAttribute('aria-label', t('card.actionsLabel', {name, exten: x.exten}));
      p.menu.title = t('card.actions');
      const inds = [...p.inds.children].map((i) => i.title).join(', ');
      card.li.setAttribute('aria-label', [name, x.exten, statusText(st), inds, peer, more].filter(Boolean).join(', '));
    }
  }

  // more says, under the call a card shows, that the extension has more
  // (a call waiting, a second line): how many, and the latest of the
  // others. Compact cards show the count only ("+1", style.css).
  more(x, c, p) {
    const others = Object.values(x.conversations || {}).filter((o) => o !== c);
    if (!others.length) {
      p.more.hidden = true;
      delete p.call.dataset.more;
      return;
    }
    const latest = others.reduce((a, o) => ((o.startTime || 0) > (a.startTime || 0) ? o : a));
    const text = t('card.more', {n: others.length + 1, who: peerText(latest, x.exten)});
    if (p.more.textContent !== text) p.more.textContent = text;
    p.more.hidden = false;
    p.call.dataset.more = '+' + others.length;
  }

  updateInds(x, card) {
    const inds = indicators(x);
    const key = inds.map((i) => i[1]).join('|');
    if (card.inds === key) return;
    card.inds = key;
    card.parts.inds.replaceChildren(...inds.map(([cls, short, long]) => el('span', {class: 'ind ' + cls, title: long}, short)));
  }

  tick() {
    for (const card of this.ticking) {
      const c = card.conv;
      if (c.connected) card.parts.dur.textContent = fmtDuration(talkSeconds(c));
      if (c.parked?.parking) card.parts.note.textContent = convNote(c);
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
    else if (group === 'busy') ok = ['busy', 'busy_ringing', 'ringing', 'onhold', 'parked'].includes(card.status);
    else if (group === 'offline') ok = card.status === 'offline';
    else if (group !== 'all') ok = this.groups[group]?.has(card.li.dataset.exten) ?? false;
    if (ok && text) {
      const hay = (card.parts.name.textContent + ' ' + card.li.dataset.exten + ' ' + card.parts.peer.textContent).toLowerCase();
      ok = hay.includes(text);
    }
    if (card.li.hidden === ok) card.li.hidden = !ok;
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

  // focusFirst moves the focus to the first card shown.
  focusFirst() {
    const first = this.visibleCards()[0];
    if (!first) return;
    this.root.querySelector('li.card[tabindex="0"]')?.setAttribute('tabindex', '-1');
    first.setAttribute('tabindex', '0');
    first.focus();
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
      case 'm': case 'M': case 'ContextMenu':
        e.preventDefault();
        this.opts.onMenu(li.dataset.exten, li.querySelector('.menu-btn'));
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
