// ctibridge operator panel: wiring of login, live state, views and actions.

import {el, $, toast} from './util.js';
import {api, ApiError} from './api.js';
import {Live} from './live.js';
import {state, can, myEndpoints, nameOf} from './state.js';
import {Grid} from './grid.js';
import {CallsBar} from './calls.js';
import {QueuesView} from './queues.js';
import {Phonebook} from './phonebook.js';
import {History} from './history.js';
import {Popup} from './popup.js';

const views = ['ext', 'queues', 'phonebook', 'history'];

const grid = new Grid($('#grid'), {
  nameOf: (exten, x) => nameOf(exten, x),
  onCall: (exten) => call(exten),
  onDropTransfer: (exten, d) => transfer(d, exten),
  onKeyTransfer: (exten) => {
    const a = bar.active();
    if (a) transfer({convid: a.conv.id, endpointId: a.endpoint}, exten);
    else toast('No call to transfer', 'error');
  },
  onCount: (n, total) => { $('#ext-count').textContent = n === total ? `${total} extensions` : `${n} of ${total} extensions`; },
});
const bar = new CallsBar($('#mycalls'));
const queues = new QueuesView($('#queues'), $('#parkings'));
const phonebook = new Phonebook($('#view-phonebook'), (n) => call(n));
const history = new History($('#view-history'), (n) => call(n));
const popup = new Popup($('#popup'), (n) => { showView('history'); history.showNumber(n); });

const live = new Live({
  snapshot(m) {
    state.exts = m.extensions || {};
    if (m.queues) state.queues = m.queues;
    if (m.parkings) state.parkings = m.parkings;
    if (m.trunks) state.trunks = m.trunks;
    if (m.pbx) state.pbx = m.pbx;
    state.stale = !!m.stale;
    grid.setAll(state.exts);
    refreshGroups();
    bar.render();
    queues.render();
    popup.update();
    banner();
    markPainted('ctib:grid');
  },
  event(m) {
    const d = m.data;
    switch (m.type) {
      case 'extenUpdate':
        state.exts[d.exten] = d;
        grid.set(d);
        if (myEndpoints().includes(d.exten)) bar.render();
        popup.update();
        queuesDirty();
        break;
      case 'extenRinging':
        // Not for the first leg of our own click-to-call: the PBX rings
        // our phone with our own number as the caller.
        if (myEndpoints().includes(d.exten) && !myEndpoints().includes(d.callerNum)) popup.show(d);
        break;
      case 'queueUpdate':
        state.queues[d.queue] = d;
        queuesDirty();
        refreshGroups();
        break;
      case 'queueMemberUpdate': {
        const q = state.queues[d.queue];
        if (q) {
          q.members = q.members || {};
          if (d.loggedIn === false && !d.name && !d.type) delete q.members[d.member];
          else q.members[d.member] = {...q.members[d.member], ...d};
          queuesDirty();
        }
        break;
      }
      case 'parkingUpdate':
        state.parkings[d.parking] = d;
        queuesDirty();
        break;
      case 'trunkUpdate':
        state.trunks[d.name] = d;
        break;
      case 'pbxStatus':
        state.pbx = d;
        state.stale = d.pbx !== 'live';
        banner();
        break;
    }
  },
  status(s, attempt) {
    state.link = s;
    state.attempt = attempt || 0;
    banner();
  },
  authFailed() { logout(true); },
});

// queuesDirty re-renders the queues view at most once per frame.
let qPending = false;
function queuesDirty() {
  if (qPending) return;
  qPending = true;
  requestAnimationFrame(() => { qPending = false; queues.render(); });
}

// markPainted records when a render reached the screen (two frames
// later), for the first-paint measurement in docs/panel.md.
function markPainted(name) {
  requestAnimationFrame(() => requestAnimationFrame(() => {
    if (!performance.getEntriesByName(name).length) performance.mark(name);
  }));
}

function refreshGroups() {
  const sel = $('#ext-group');
  const cur = sel.value;
  const groups = {mine: new Set(myEndpoints())};
  const opts = [el('option', {value: 'all'}, 'Everyone')];
  if (myEndpoints().length) opts.push(el('option', {value: 'mine'}, 'My extensions'));
  const qs = Object.values(state.queues);
  if (qs.length) {
    opts.push(el('optgroup', {label: 'Queue members'}, ...qs.map((q) => {
      groups['queue:' + q.queue] = new Set(Object.keys(q.members || {}));
      return el('option', {value: 'queue:' + q.queue}, q.name || q.queue);
    })));
  }
  opts.push(el('optgroup', {label: 'Status'},
    el('option', {value: 'available'}, 'Available'),
    el('option', {value: 'busy'}, 'Busy or ringing'),
    el('option', {value: 'offline'}, 'Offline')));
  const key = JSON.stringify(Object.entries(groups).map(([k, v]) => [k, [...v]]));
  if (key !== refreshGroups.key) {
    refreshGroups.key = key;
    sel.replaceChildren(...opts);
    sel.value = [...sel.options].some((o) => o.value === cur) ? cur : 'all';
    grid.setGroups(groups);
  }
}

function banner() {
  const b = $('#banner');
  let msg = '', kind = 'warn';
  if (state.link === 'reconnecting') {
    msg = `Connection to the server lost — reconnecting${state.attempt > 1 ? ` (attempt ${state.attempt})` : ''}… The state shown may be out of date.`;
    kind = 'error';
  } else if (state.pbx?.pbx === 'down') {
    msg = 'PBX link down — the state shown may be out of date and calls cannot be controlled.';
    kind = 'error';
  } else if (state.pbx?.pbx === 'resyncing' || state.stale) {
    msg = 'Resynchronising with the PBX…';
  } else if (state.link === 'polling') {
    msg = 'Live updates unavailable: refreshing every 2 seconds.';
  }
  b.textContent = msg;
  b.className = 'banner ' + kind;
  b.hidden = !msg;
  b.dataset.state = msg ? (state.link === 'reconnecting' ? 'reconnecting' : state.pbx?.pbx === 'down' ? 'down' : state.link === 'polling' ? 'polling' : 'resyncing') : 'live';
}

async function call(number) {
  if (!can('call')) { toast('You may not place calls', 'error'); return; }
  const from = $('#dial-from').value || myEndpoints()[0];
  if (!from && state.me.role !== 'admin') { toast('You have no phone to call from', 'error'); return; }
  try {
    await api.post('/astproxy/call', from ? {number, endpointId: from} : {number});
    toast(`Calling ${number}${from ? ` from ${from}` : ''}… answer your phone.`);
  } catch (e) {
    toast(`Call ${number}: ${e.message}`, 'error');
  }
}

async function transfer({convid, endpointId}, to) {
  try {
    await api.post('/astproxy/blindtransfer', {convid, endpointId, to});
    toast(`Transferring to ${to}`);
  } catch (e) {
    toast(`Transfer to ${to}: ${e.message}`, 'error');
  }
}

function showView(name) {
  for (const v of views) {
    const tab = $('#tab-' + v), panel = $('#view-' + v);
    const on = v === name;
    tab.setAttribute('aria-selected', String(on));
    tab.tabIndex = on ? 0 : -1;
    panel.hidden = !on;
  }
  if (name === 'history' && !history.loaded) { history.loaded = true; history.load(true); }
}

function setupTabs() {
  const tabs = views.map((v) => $('#tab-' + v));
  tabs.forEach((t, i) => {
    t.addEventListener('click', () => showView(views[i]));
    t.addEventListener('keydown', (e) => {
      let j = -1;
      if (e.key === 'ArrowRight') j = (i + 1) % tabs.length;
      if (e.key === 'ArrowLeft') j = (i + tabs.length - 1) % tabs.length;
      if (j >= 0) { e.preventDefault(); showView(views[j]); tabs[j].focus(); }
    });
  });
}

async function start() {
  try {
    state.me = await api.get('/user/me');
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) { showLogin(); return; }
    showLogin(`The server cannot be reached: ${e.message}`);
    return;
  }
  $('#login-view').hidden = true;
  $('#app').hidden = false;
  $('#whoami').textContent = `${state.me.name || state.me.username} (${state.me.role})`;
  const from = $('#dial-from');
  from.replaceChildren(...myEndpoints().map((e) => el('option', {value: e}, e)));
  $('#dial-from-wrap').hidden = myEndpoints().length < 2;
  $('#dial-form').hidden = !can('call');
  $('#pb-new').hidden = false;
  history.loaded = false;
  showView('ext');
  live.start();
  $('#ext-search').focus({preventScroll: true});
}

function showLogin(msg = '') {
  $('#app').hidden = true;
  $('#login-view').hidden = false;
  $('#login-error').textContent = msg;
  $('#banner').hidden = true;
  $('#login-form').elements.username.focus();
}

async function logout(expired) {
  live.stop();
  popup.hide();
  if (!expired && api.token) {
    try { await api.post('/auth/logout'); } catch { /* logged out anyway */ }
  }
  api.setToken('');
  state.me = null;
  state.exts = {};
  grid.setAll({});
  showLogin(expired ? 'Your session ended: log in again.' : '');
}

api.onUnauthorized = () => { if (state.me) logout(true); };

$('#login-form').addEventListener('submit', async (e) => {
  e.preventDefault();
  const f = e.target.elements;
  $('#login-error').textContent = '';
  f.submit.disabled = true;
  try {
    const r = await api.post('/auth/login', {username: f.username.value.trim(), password: f.password.value});
    api.setToken(r.token);
    f.password.value = '';
    await start();
  } catch (err) {
    $('#login-error').textContent = err.status === 401 ? 'Wrong user name or password.'
      : err.status === 429 ? 'Too many attempts: wait a minute.' : err.message;
  } finally {
    f.submit.disabled = false;
  }
});
$('#logout').addEventListener('click', () => logout(false));
$('#dial-form').addEventListener('submit', (e) => {
  e.preventDefault();
  const n = e.target.elements.number.value.trim();
  if (n) call(n);
});
$('#ext-search').addEventListener('input', (e) => grid.setFilter({text: e.target.value.trim().toLowerCase()}));
$('#ext-group').addEventListener('change', (e) => grid.setFilter({group: e.target.value}));
document.addEventListener('keydown', (e) => {
  // "/" jumps to the search box, as in many web apps.
  if (e.key === '/' && !e.target.closest('input, textarea, select') && !$('#app').hidden) {
    e.preventDefault();
    showView('ext');
    $('#ext-search').focus();
  }
});
setupTabs();
setInterval(() => { grid.tick(); bar.tick(); queues.tick(); }, 1000);

if (api.token) start();
else showLogin();
