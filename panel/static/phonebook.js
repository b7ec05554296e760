// Phonebook: search, call a number, add and edit private contacts.

import {el, $, toast} from './util.js';
import {api, enc} from './api.js';
import {state} from './state.js';

const NUMBERS = [['workphone', 'work'], ['cellphone', 'mobile'], ['homephone', 'home']];
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
      if (seq === this.seq) this.results.replaceChildren(el('p', {class: 'error'}, `Search failed: ${e.message}`));
    } finally {
      if (seq === this.seq) this.results.removeAttribute('aria-busy');
    }
  }

  show(rows, count, term) {
    if (!rows.length) {
      this.results.replaceChildren(el('p', {class: 'muted'}, `No contact matches “${term}”.`));
      return;
    }
    const mine = (c) => c.type === 'private' && c.owner_id === state.me?.username;
    const table = el('table', {class: 'table'},
      el('caption', null, `${count} contact${count === 1 ? '' : 's'} matching “${term}”`),
      el('thead', null, el('tr', null, ...['Name', 'Company', 'Numbers', 'Type', ''].map((h) => el('th', {scope: 'col'}, h)))),
      el('tbody', null, ...rows.map((c) => el('tr', {'data-id': c.id},
        el('td', null, c.name || ''),
        el('td', null, c.company || ''),
        el('td', {class: 'numbers'}, ...NUMBERS.filter(([k]) => c[k]).map(([k, label]) =>
          el('button', {type: 'button', class: 'link call-number', 'aria-label': `Call ${c.name || ''} ${label} ${c[k]}`,
            onclick: () => this.onCall(c[k])}, `${label}: ${c[k]}`))),
        el('td', null, c.type || ''),
        el('td', null, mine(c) && el('button', {type: 'button', onclick: () => this.edit(c)}, 'Edit'),
          mine(c) && el('button', {type: 'button', class: 'danger', onclick: () => this.remove(c)}, 'Delete'))))));
    this.results.replaceChildren(table);
  }

  edit(c) {
    this.editing = c;
    $('#contact-title').textContent = c ? 'Edit contact' : 'New private contact';
    for (const f of FIELDS) this.cform.elements[f].value = c?.[f] || '';
    $('#contact-error').textContent = '';
    this.dialog.showModal();
  }

  async save() {
    const body = {type: 'private'};
    for (const f of FIELDS) body[f] = this.cform.elements[f].value.trim();
    if (!body.name && !body.company) {
      $('#contact-error').textContent = 'A contact needs a name or a company.';
      return;
    }
    try {
      if (this.editing) await api.post('/phonebook/modify_cticontact', {...this.editing, ...body, id: this.editing.id});
      else await api.post('/phonebook/create', body);
      this.dialog.close();
      toast(this.editing ? 'Contact saved' : 'Contact added');
      await this.search(this.form.elements.term.value.trim() || body.name || body.company);
    } catch (e) {
      $('#contact-error').textContent = e.message;
    }
  }

  async remove(c) {
    if (!confirm(`Delete ${c.name || c.company}?`)) return;
    try {
      await api.post('/phonebook/delete_cticontact', {id: c.id});
      toast('Contact deleted');
      await this.search();
    } catch (e) { toast(e.message, 'error'); }
  }
}
