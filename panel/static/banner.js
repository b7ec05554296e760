// The banner over the page: the link to the server and the PBX's state,
// in plain words (red when the state shown may be wrong). While the state
// shown may be wrong (no socket, the PBX link down, stalled or
// resynchronising), the cards and views are greyed (#app.stale): a card
// that looks available must be one.

import {$} from './util.js';
import {t} from './i18n.js';
import {state} from './state.js';

export function banner() {
  const b = $('#banner');
  let msg = '', kind = 'warn', code = 'live';
  if (state.link === 'reconnecting') {
    msg = state.attempt > 1 ? t('ban.reconnectingN', {n: state.attempt}) : t('ban.reconnecting');
    kind = 'error';
    code = 'reconnecting';
  } else if (state.pbx?.pbx === 'down') {
    msg = t('ban.down');
    kind = 'error';
    code = 'down';
  } else if (state.pbx?.pbx === 'resyncing' || state.pbx?.pbx === 'stalled' || state.stale) {
    msg = t('ban.resync');
    code = 'resyncing';
  } else if (state.link === 'polling') {
    msg = t('ban.polling');
    code = 'polling';
  }
  b.textContent = msg;
  b.className = 'banner ' + kind;
  b.hidden = !msg;
  b.dataset.state = code;
  $('#app').classList.toggle('stale', code !== 'live' && code !== 'polling');
}
