// Call history: the user's own, or the whole switchboard's for a user
// with history_switchboard (the default for one without a phone, such
// as an administrator); a time window, a direction, keyset paging (next
// cursor; previous pages from a stack) and CSV download.

import {el, $, fmtTime, fmtDuration, isoDay, ymd, toast} from './util.js';
import {api, enc} from './api.js';
import {state} from './state.js';
import {t} from './i18n.js';

const PAGE = 25;

export class History {
  // onCall(number)
  constructor(root, onCall) {
    this.root = root;
    this.onCall = onCall;
    this.form = $('#hist-form', root);
    this.table = $('#hist-results', root);
    this.cursors = [];   // cursors of the pages before the current one
    this.cursor = '';    // the current page's cursor ('' = first)
    this.next = null;
    this.number = '';    // optional filter on the other party
    const f = this.form.elements;
    const today = new Date();
    f.to.value = isoDay(today);
    f.from.value = isoDay(new Date(today.getTime() - 30 * 86400e3));
    this.form.addEventListener('submit', (e) => { e.preventDefault(); this.load(true); });
    $('#hist-prev', root).addEventListener('click', () => this.page(-1));
    $('#hist-next', root).addEventListener('click', () => this.page(1));
    $('#hist-csv', root).addEventListener('click', () => this.csv());
  }

  // scopeFor shows the choice of whose calls to the users who may read the
  // switchboard's, once per login (app.js clears loaded).
  scopeFor() {
    const sw = !!state.me?.capabilities?.includes('history_switchboard');
    $('#hist-scope-wrap', this.root).hidden = !sw;
    this.form.elements.scope.value = sw && !(state.me?.endpoints || []).length ? 'all' : 'mine';
  }

  path(csv) {
    const f = this.form.elements;
    const win = `${ymd(f.from.value)}/${ymd(f.to.value)}${csv ? '/csv' : ''}`;
    if (f.scope.value === 'all') return `/histcallswitch/interval/${win}`;
    return `/historycall/interval/user/${enc(state.me.username)}/${win}`;
  }

  query(cursor) {
    const f = this.form.elements;
    const q = new URLSearchParams({limit: String(PAGE)});
    if (f.direction.value) q.set('direction', f.direction.value);
    if (cursor) q.set('cursor', cursor);
    return '?' + q;
  }

  // showNumber opens the history filtered on one number (the pop-up's
  // "recent calls" link).
  showNumber(num) {
    this.number = num || '';
    this.form.elements.number.value = this.number;
    this.load(true);
  }

  async load(reset) {
    const f = this.form.elements;
    if (!f.from.value || !f.to.value) { toast(t('h.window'), 'error'); return; }
    this.number = f.number.value.trim();
    if (reset) { this.cursors = []; this.cursor = ''; }
    this.table.setAttribute('aria-busy', 'true');
    try {
      const r = await api.get(this.path(false) + this.query(this.cursor));
      this.next = r.next || null;
      this.show(r.rows || [], r.count ?? 0);
    } catch (e) {
      this.table.replaceChildren(el('p', {class: 'error'}, t('h.failed', {msg: e.message})));
    } finally {
      this.table.removeAttribute('aria-busy');
    }
    $('#hist-prev', this.root).disabled = this.cursors.length === 0;
    $('#hist-next', this.root).disabled = !this.next;
  }

  page(dir) {
    if (dir > 0 && this.next) { this.cursors.push(this.cursor); this.cursor = this.next; }
    else if (dir < 0 && this.cursors.length) this.cursor = this.cursors.pop();
    else return;
    this.load(false);
  }

  show(rows, count) {
    const mine = new Set(state.me?.endpoints || []);
    const other = (h) => (h.direction === 'in' || mine.has(h.dst)) && !mine.has(h.src) ? h.src : h.dst;
    if (this.number) rows = rows.filter((h) => h.src === this.number || h.dst === this.number);
    const who = (num, name) => (name && name !== num ? `${name} (${num})` : num || '');
    const body = rows.map((h) => el('tr', null,
      el('td', null, fmtTime(h.time)),
      el('td', null, {in: t('h.in'), out: t('h.out'), internal: t('h.internal')}[h.direction] || h.direction),
      el('td', null, who(h.src, h.cnam)),
      el('td', null, who(h.dst, h.dst_cnam)),
      el('td', null, h.disposition),
      el('td', {class: 'numeric'}, fmtDuration(h.billsec ?? h.duration ?? 0)),
      el('td', null, other(h) && el('button', {type: 'button', class: 'link', 'aria-label': t('h.callLabel', {number: other(h)}), onclick: () => this.onCall(other(h))}, t('h.call')))));
    this.table.replaceChildren(el('table', {class: 'table'},
      el('caption', null, this.number ? t('h.captionWith', {count, number: this.number}) : t('h.caption', {count})),
      el('thead', null, el('tr', null, ...['h.time', 'h.dir', 'h.from', 'h.to', 'h.result', 'h.talk', ''].map((h) => el('th', {scope: 'col'}, h && t(h))))),
      el('tbody', null, ...body)));
  }

  async csv() {
    try {
      const res = await api.get(this.path(true) + this.query(''), {raw: true});
      const blob = await res.blob();
      const url = URL.createObjectURL(blob);
      const f = this.form.elements;
      const who = f.scope.value === 'all' ? 'switchboard' : state.me.username;
      const a = el('a', {href: url, download: `history-${who}-${ymd(f.from.value)}-${ymd(f.to.value)}.csv`, hidden: true});
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10000);
    } catch (e) { toast(t('msg.failed', {what: 'CSV', why: e.message}), 'error'); }
  }
}
