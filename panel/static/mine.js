// The user's own settings in the top bar: DND and call forwarding on the
// user's first extension, each shown only when /user/me allows it, and
// read back from the extension's live state (dnd, cf).

import {$, toast} from './util.js';
import {api} from './api.js';
import {t} from './i18n.js';
import {state, can, myEndpoints} from './state.js';

export class MyControls {
  constructor() {
    this.dnd = $('#me-dnd');
    this.cfWrap = $('#me-cf-wrap');
    this.cf = $('#me-cf');
    this.cfBtn = $('#me-cf-btn');
    this.dnd.addEventListener('click', () => this.toggleDND());
    this.cfBtn.addEventListener('click', () => this.toggleCF());
    this.cf.addEventListener('keydown', (e) => { if (e.key === 'Enter') this.toggleCF(); });
  }

  exten() { return myEndpoints()[0]; }

  async post(path, body, what) {
    try {
      await api.post('/astproxy/' + path, body);
      toast(t('msg.done', {what}));
    } catch (e) {
      toast(t('msg.failed', {what, why: e.message}), 'error');
    }
  }

  toggleDND() {
    const x = state.exts[this.exten()];
    this.post('dnd', {endpointId: this.exten(), activate: !x?.dnd}, t('me.dnd'));
  }

  toggleCF() {
    const x = state.exts[this.exten()];
    if (x?.cf) { this.post('cfcall', {endpointId: this.exten(), type: 'unconditional'}, t('me.cf.off')); return; }
    const to = this.cf.value.trim();
    if (!to) { this.cf.focus(); toast(t('me.cf.number'), 'error'); return; }
    this.post('cfcall', {endpointId: this.exten(), type: 'unconditional', to}, t('me.cf.set'));
  }

  // render follows the user's extension: pressed DND, the forward target.
  render() {
    const e = this.exten();
    const x = e ? state.exts[e] : null;
    this.dnd.hidden = !e || !can('dnd');
    this.cfWrap.hidden = !e || !can('call_forward');
    if (!x) return;
    this.dnd.setAttribute('aria-pressed', String(!!x.dnd));
    this.dnd.classList.toggle('on', !!x.dnd);
    const cf = x.cf || '';
    if (cf) this.cf.value = cf;
    this.cf.disabled = !!cf;
    this.cfBtn.textContent = cf ? t('me.cf.off') : t('me.cf.set');
    this.cfBtn.setAttribute('aria-pressed', String(!!cf));
  }
}
