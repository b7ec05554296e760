// Phonebook: search, call a number, add and edit private contacts.

import {el, $, toast} from './util.js';
import {api, enc} from './api.js';
import {state} from './state.js';
import {t} from './i18n.js';

const NUMBERS = [['workphone', 'pb.work'], ['cellphone', 'pb.mobile'], ['homephone', 'pb.home']];
const FIELDS = ['name', 'company', 'workphone', 'cellphone', 'homephone', 'workemail', 'notes'];

export class Phonebook {
  // onCall(number)
  constructor(root, onCall) {
    this.root = root;
    this.onCall = onCall;
    this.form = $('#pb-search', root);
    this.results = $('#pb-results', root);
    this.dialog = $('#contact-dialog');
    this.cform = $('#contact-form');
    this.editing = null;
    this.form.addEventListener('submit', (e) => { e.preventDefault(); this.search(); });
    $('#pb-new', root).addEventListener('click', () => this.edit(null));
    this.cform.addEventListener('submit', (e) => { e.preventDefault(); this.save(); });
    $('#contact-cancel').addEventListener('click', () => this.dialog.close());
  }

  async search(term = this.form.elements.term.value.trim()) {
    this.form.elements.term.value = term;
    if (!term) { this.results.replaceChildren(); return; }
    // Only the latest search may paint: an earlier one answering late
    // must not replace its results.
    const seq = this.seq = (this.seq || 0) + 1;
    this.results.setAttribute('aria-busy', 'true');
    try {
      const r = await api.get(`/phonebook/search/${enc(term)}?limit=50`);
      if (seq === this.seq) this.show(r.rows || [], r.count ?? 0, term);
    } catch (e) {
      if (seq === this.seq) this.results.replaceChildren(el('p', {class: 'error'}, t('pb.failed', {msg: e.message})));
    } finally {
      if (seq === this.seq) this.results.removeAttribute('aria-busy');
    }
  }

  show(rows, count, term) {
    if (!rows.length) {
      this.results.replaceChildren(el('p', {class: 'muted'}, t('pb.none', {term})));
      return;
    }
    const mine = (c) => c.type === 'private' && c.owner_id === state.me?.username;
    const table = el('table', {class: 'table'},
      el('caption', null, t('pb.count', {count, more: count > rows.length ? t('pb.more', {n: rows.length}) : ''})),
      el('thead', null, el('tr', null, ...['pb.name', 'pb.company', 'pb.numbers', 'pb.type', ''].map((h) => el('th', {scope: 'col'}, h && t(h))))),
      el('tbody', null, ...rows.map((c) => el('tr', {'data-id': c.id},
        el('td', null, c.name || ''),
        el('td', null, c.company || ''),
        el('td', {class: 'numbers'}, ...NUMBERS.filter(([k]) => c[k]).map(([k, key]) =>
          el('button', {type: 'button', class: 'link call-number', 'aria-label': t('pb.callNum', {name: c.name || '', kind: t(key), num: c[k]}),
            onclick: () => this.onCall(c[k])}, `${t(key)}: ${c[k]}`))),
        el('td', null, c.type === 'private' ? t('pb.private') : c.type === 'public' ? t('pb.public') : (c.type || '')),
        el('td', null, mine(c) && el('button', {type: 'button', onclick: () => this.edit(c)}, t('pb.edit')),
          mine(c) && el('button', {type: 'button', class: 'danger', onclick: () => this.remove(c)}, t('pb.delete')))))));
    this.results.replaceChildren(table);
  }

  edit(c) {
    this.editing = c;
    $('#contact-title').textContent = c ? t('c.editTitle') : t('c.newTitle');
    for (const f of FIELDS) this.cform.elements[f].value = c?.[f] || '';
    $('#contact-error').textContent = '';
    this.dialog.showModal();
  }

  async save() {
    const body = {type: 'private'};
    for (const f of FIELDS) body[f] = this.cform.elements[f].value.trim();
    if (!body.name && !body.company) {
      $('#contact-error').textContent = t('pb.needName');
      return;
    }
    try {
      if (this.editing) await api.post('/phonebook/modify_cticontact', {...this.editing, ...body, id: this.editing.id});
      else await api.post('/phonebook/create', body);
      this.dialog.close();
      toast(t('pb.saved'));
      await this.search(this.form.elements.term.value.trim() || body.name || body.company);
    } catch (e) {
      $('#contact-error').textContent = e.message;
    }
  }

  async remove(c) {
    if (!confirm(t('pb.confirmDelete', {name: c.name || c.company}))) return;
    try {
      await api.post('/phonebook/delete_cticontact', {id: c.id});
      toast(t('pb.deleted'));
      await this.search();
    } catch (e) { toast(e.message, 'error'); }
  }
}
