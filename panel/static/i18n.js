// Every string the panel shows, in English and Italian: one table, one
// entry per string, [English, Italian]. t(key, vars) picks the user's
// language ({name} placeholders are filled from vars). The language is
// the one chosen with the switch (kept in localStorage), else the
// browser's. index.html marks its static text with data-i18n="key" (the
// text) and data-i18n-attr="attr:key;attr:key" (attributes).

const S = {
  // Login, top bar, tabs.
  'app.title': ['ctibridge operator panel', 'ctibridge pannello operatore'],
  'skip': ['Skip to the extensions', 'Vai agli interni'],
  'login.sub': ['Operator panel', 'Pannello operatore'],
  'login.user': ['User name', 'Nome utente'],
  'login.pass': ['Password', 'Password'],
  'login.submit': ['Log in', 'Accedi'],
  'login.bad': ['Wrong user name or password.', 'Nome utente o password errati.'],
  'login.slow': ['Too many attempts: wait a minute.', 'Troppi tentativi: attendi un minuto.'],
  'login.expired': ['Your session ended: log in again.', 'La sessione è scaduta: accedi di nuovo.'],
  'login.revoked': ['Your session was ended on the server (a logout elsewhere, or an administrator): log in again.', 'La sessione è stata chiusa dal server (uscita da un\'altra parte o da un amministratore): accedi di nuovo.'],
  'login.unreachable': ['The server cannot be reached: {msg}', 'Il server non risponde: {msg}'],
  'dial.label': ['Place a call', 'Chiama'],
  'dial.number': ['Number to call', 'Numero da chiamare'],
  'dial.from': ['from', 'da'],
  'dial.call': ['Call', 'Chiama'],
  'logout': ['Log out', 'Esci'],
  'mycalls': ['My calls', 'Le mie chiamate'],
  'mycalls.none': ['No calls on your phone.', 'Nessuna chiamata sul tuo telefono.'],
  'tabs': ['Views', 'Viste'],
  'tab.ext': ['Extensions', 'Interni'],
  'tab.queues': ['Queues & parking', 'Code e parcheggi'],
  'tab.trunks': ['Trunks', 'Linee'],
  'tab.confs': ['Conferences', 'Conferenze'],
  'tab.phonebook': ['Phonebook', 'Rubrica'],
  'tab.history': ['History', 'Storico'],
  'prefs.lang': ['Language', 'Lingua'],
  'prefs.theme': ['Theme', 'Tema'],
  'prefs.theme.auto': ['System', 'Sistema'],
  'prefs.theme.light': ['Light', 'Chiaro'],
  'prefs.theme.dark': ['Dark', 'Scuro'],
  'prefs.compact': ['Compact', 'Compatta'],
  'me.dnd': ['Do not disturb', 'Non disturbare'],
  'me.cf': ['Forward to', 'Inoltra a'],
  'me.cf.set': ['Forward', 'Inoltra'],
  'me.cf.off': ['Stop forwarding', 'Togli inoltro'],
  'me.pres': ['My presence', 'La mia presenza'],
  'me.pres.set': ['Presence: {status}', 'Presenza: {status}'],
  'me.cf.number': ['Number to forward your calls to', 'Numero a cui inoltrare le chiamate'],

  // Extensions toolbar and grid.
  'search': ['Search', 'Cerca'],
  'search.ph': ['Name or number ( / )', 'Nome o numero ( / )'],
  'show': ['Show', 'Mostra'],
  'group.all': ['Everyone', 'Tutti'],
  'group.tabs': ['Groups', 'Gruppi'],
  'group.mine': ['My extensions', 'I miei interni'],
  'group.queues': ['Queue members', 'Membri delle code'],
  'group.status': ['Status', 'Stato'],
  'group.available': ['Available', 'Disponibili'],
  'group.busy': ['Busy or ringing', 'Occupati o squillano'],
  'group.offline': ['Offline', 'Non connessi'],
  'grid.label': ['Extensions', 'Interni'],
  'grid.hint': ['Arrows move, Enter calls, T transfers your call, M opens the actions; or drag your call onto a name.',
    'Frecce per spostarsi, Invio chiama, T trasferisce la tua chiamata, M apre le azioni; o trascina la chiamata su un nome.'],
  'grid.count': ['{n} extensions', '{n} interni'],
  'grid.countOf': ['{n} of {total} extensions', '{n} di {total} interni'],
  'st.online': ['Available', 'Disponibile'],
  'st.ringing': ['Ringing', 'Squilla'],
  'st.busy': ['Busy', 'Occupato'],
  'st.busy_ringing': ['Busy, ringing', 'Occupato, squilla'],
  'st.onhold': ['On hold', 'In attesa'],
  'st.dnd': ['Do not disturb', 'Non disturbare'],
  'st.offline': ['Offline', 'Non connesso'],
  'st.parked': ['Parked', 'Parcheggiato'],
  'dir.in': ['incoming', 'in arrivo'],
  'dir.out': ['outgoing', 'in uscita'],
  'peer.private': ['private number', 'numero riservato'],
  'peer.dialling': ['dialling…', 'in chiamata…'],
  'peer.service': ['PBX service', 'servizio del centralino'],
  'conv.parked': ['parked on {parking}', 'parcheggiato su {parking}'],
  'conv.parkedBy': ['parked on {parking} by {by}', 'parcheggiato su {parking} da {by}'],
  'conv.left': ['{time} left', 'mancano {time}'],
  'conv.xfer.transferer': ['transferring', 'sta trasferendo'],
  'conv.xfer.transferee': ['being transferred', 'in trasferimento'],
  'conv.xfer.target': ['transfer offered', 'trasferimento in arrivo'],
  'conv.spy.listen': ['listening to {who}', 'ascolta {who}'],
  'conv.spy.whisper': ['whispering to {who}', 'suggerisce a {who}'],
  'conv.spy.barge': ['barged in on {who}', 'interviene su {who}'],
  'conv.conf': ['in conference', 'in conferenza'],
  'ind.dnd': ['DND', 'ND'],
  'ind.dnd.long': ['Do not disturb', 'Non disturbare'],
  'ind.cf': ['forwards to {to}', 'inoltra a {to}'],
  'ind.cfb': ['when busy to {to}', 'se occupato a {to}'],
  'ind.cfu': ['when unavailable to {to}', 'se non risponde a {to}'],
  'ind.rec': ['● REC', '● REG'],
  'ind.rec.long': ['The call is being recorded', 'La chiamata è registrata'],
  'ind.recPaused': ['REC paused', 'REG sospesa'],
  'ind.recPaused.long': ['The recording is paused', 'La registrazione è sospesa'],
  'ind.vmbox': ['voicemail', 'segreteria'],
  'ind.vm': ['{n} new voicemail', '{n} nuovi messaggi vocali'],
  'pres.online': ['online', 'disponibile'],
  'pres.dnd': ['do not disturb', 'non disturbare'],
  'pres.voicemail': ['to voicemail', 'in segreteria'],
  'pres.cellphone': ['on the mobile', 'sul cellulare'],
  'pres.callforward': ['forwarding', 'inoltro'],
  'pres.busy': ['busy', 'occupato'],
  'pres.ringing': ['ringing', 'squilla'],
  'pres.offline': ['offline', 'non connesso'],
  'card.call': ['Call', 'Chiama'],
  'card.callLabel': ['Call {name} {exten}', 'Chiama {name} {exten}'],
  'card.actions': ['Actions', 'Azioni'],
  'card.actionsLabel': ['Actions on {name} {exten}', 'Azioni su {name} {exten}'],
  'act.pickup': ['Pick up', 'Rispondi al posto suo'],
  'act.hangup': ['Hang up', 'Riaggancia'],
  'act.spy': ['Listen', 'Ascolta'],
  'act.whisper': ['Whisper', 'Suggerisci'],
  'act.xferVm': ['Transfer my call to their voicemail', 'Trasferisci la mia chiamata alla sua segreteria'],
  'act.xferMobile': ['Transfer my call to their mobile', 'Trasferisci la mia chiamata al suo cellulare'],
  'xfer.offline': ['{name} is offline: the call was not transferred', '{name} non è collegato: la chiamata non è stata trasferita'],
  'xfer.dnd': ['{name} does not want to be disturbed: the call was not transferred', '{name} non vuole essere disturbato: la chiamata non è stata trasferita'],
  'xfer.unknown': ['There is no extension {to}: the call was not transferred', 'L\'interno {to} non esiste: la chiamata non è stata trasferita'],
  'pickup.failed': ['The pickup of {name}\'s call failed: it was answered elsewhere or ended before your phone took it', 'Risposta per {name} non riuscita: la chiamata ha avuto risposta altrove o è terminata prima che il tuo telefono la prendesse'],
  'pickup.noAnswer': ['The pickup of {name}\'s call failed: your phone did not answer', 'Risposta per {name} non riuscita: il tuo telefono non ha risposto'],
  'pop.card': ['Customer card', 'Scheda cliente'],
  'err.noMobile': ['That colleague has no mobile number', 'Quel collega non ha un numero di cellulare'],
  'err.noVoicemail': ['That colleague has no voicemail box', 'Quel collega non ha una segreteria'],
  'err.noRinging': ['That call is no longer ringing', 'Quella chiamata non squilla più'],
  'act.intrude': ['Intrude', 'Intervieni'],
  'act.xferHere': ['Transfer my call here', 'Trasferisci qui la mia chiamata'],
  'act.callBack': ['Call {number}', 'Chiama {number}'],
  'act.park': ['Park', 'Parcheggia'],
  'act.record': ['Record', 'Registra'],
  'act.stoprec': ['Stop recording', 'Ferma registrazione'],
  'act.mute': ['Pause recording', 'Sospendi registrazione'],
  'act.unmute': ['Resume recording', 'Riprendi registrazione'],
  'act.transfer': ['Transfer', 'Trasferisci'],
  'act.atxfer': ['Attended', 'Con consultazione'],
  'act.complete': ['Complete transfer', 'Completa trasferimento'],
  'q.ofAgent': ['of {who}', 'di {who}'],
  'act.completeWait': ['The transfer can be completed once the other party answers.', 'Il trasferimento si può completare quando l\'altra persona risponde.'],
  'act.cancel': ['Cancel transfer', 'Annulla trasferimento'],
  'act.cfOn': ['Forward calls to…', 'Inoltra le chiamate a…'],
  'act.cfOff': ['Stop forwarding', 'Togli inoltro'],
  'act.cfTo': ['Forward {name} to {to}', 'Inoltro di {name} a {to}'],
  'act.cfNumber': ['Forward the calls of {name} to', 'Inoltra le chiamate di {name} a'],
  'act.dndOn': ['Set do not disturb', 'Attiva non disturbare'],
  'act.dndOff': ['Clear do not disturb', 'Togli non disturbare'],
  'act.close': ['Close', 'Chiudi'],
  'act.none': ['Nothing you may do here now.', 'Nessuna azione possibile ora.'],

  // Toasts.
  'msg.calling': ['Calling {number}… answer your phone.', 'Chiamata a {number}… rispondi al telefono.'],
  'msg.callingFrom': ['Calling {number} from {from}… answer your phone.', 'Chiamata a {number} da {from}… rispondi al telefono.'],
  'msg.transferring': ['Transferring to {to}', 'Trasferimento a {to}'],
  'msg.xferTo': ['Transfer to {to}', 'Trasferimento a {to}'],
  'msg.atxferTo': ['Attended transfer to {to}', 'Trasferimento con consultazione a {to}'],
  'msg.noCall': ['No call to transfer', 'Nessuna chiamata da trasferire'],
  'msg.typeNumber': ['Type the number to transfer to', 'Scrivi il numero a cui trasferire'],
  'msg.done': ['Done: {what}', 'Fatto: {what}'],
  'msg.pickingUp': ['Picking up the call parked on {parking}', 'Ripresa della chiamata parcheggiata su {parking}'],
  'msg.failed': ['{what}: {why}', '{what}: {why}'],

  // Plain words for errors (errors.js).
  'err.noPhone': ['You have no phone to call from', 'Non hai un telefono da cui chiamare'],
  'err.mayNot': ['You may not do this', 'Non hai il permesso di farlo'],
  'err.mayNotCall': ['You may not place calls', 'Non hai il permesso di chiamare'],
  'err.network': ['The server cannot be reached', 'Il server non risponde'],
  'err.badInput': ['This number or request is not valid', 'Numero o richiesta non valida'],
  'err.session': ['Your session ended: log in again', 'La sessione è scaduta: accedi di nuovo'],
  'err.notFound': ['That extension, queue or parking space does not exist', 'Interno, coda o parcheggio inesistente'],
  'err.gone': ['The call is no longer there, or not in a state that allows this', 'La chiamata non c\'è più, o non lo permette in questo stato'],
  'err.refused': ['The PBX refused: {why}', 'Il centralino ha rifiutato: {why}'],
  'err.refusedUnknown': ['The PBX refused the request', 'Il centralino ha rifiutato la richiesta'],
  'err.unsupported': ['this PBX does not offer that feature', 'questo centralino non offre la funzione'],
  'err.noSuchChannel': ['the call is no longer there', 'la chiamata non c\'è più'],
  'err.confMemberGone': ['that person is no longer in the conference', 'quella persona non è più nella conferenza'],
  'err.confGone': ['the conference has already ended', 'la conferenza è già terminata'],
  'err.callFailed': ['the call could not be placed', 'non è stato possibile effettuare la chiamata'],
  'err.alreadyMember': ['already a member of that queue', 'è già membro di quella coda'],
  'err.notMember': ['not a member of that queue (or a fixed one)', 'non è membro di quella coda (o è un membro fisso)'],
  'err.noQueue': ['that queue does not exist', 'quella coda non esiste'],
  'err.down': ['The PBX is not connected: try again in a moment', 'Il centralino non è connesso: riprova tra poco'],
  'err.timeout': ['The PBX did not answer in time', 'Il centralino non ha risposto in tempo'],
  'err.tooBig': ['The request is too large', 'La richiesta è troppo grande'],
  'err.slow': ['Too many requests: wait a moment', 'Troppe richieste: attendi un momento'],
  'err.server': ['The server failed ({status})', 'Errore del server ({status})'],
  'err.unavailable': ['Not available on this server', 'Non disponibile su questo server'],

  // Banners.
  'ban.reconnecting': ['Connection to the server lost — reconnecting… The state shown may be out of date.',
    'Connessione al server persa — riconnessione… Lo stato mostrato può non essere aggiornato.'],
  'ban.reconnectingN': ['Connection to the server lost — reconnecting (attempt {n})… The state shown may be out of date.',
    'Connessione al server persa — riconnessione (tentativo {n})… Lo stato mostrato può non essere aggiornato.'],
  'ban.down': ['PBX link down — the state shown may be out of date and calls cannot be controlled.',
    'Collegamento al centralino interrotto — lo stato può non essere aggiornato e le chiamate non si possono comandare.'],
  'ban.resync': ['Resynchronising with the PBX…', 'Risincronizzazione con il centralino…'],
  'ban.polling': ['Live updates unavailable: refreshing every 2 seconds.', 'Aggiornamenti in tempo reale non disponibili: aggiorno ogni 2 secondi.'],

  // Queues, parkings.
  'q.title': ['Queues', 'Code'],
  'q.none': ['No queues.', 'Nessuna coda.'],
  'q.label': ['Queue {name}', 'Coda {name}'],
  'q.stats': ['{waiting} waiting · {completed} answered · {abandoned} abandoned · hold {hold} · talk {talk}',
    '{waiting} in attesa · {completed} risposte · {abandoned} abbandonate · attesa {hold} · conversazione {talk}'],
  'q.sl': ['service level {pct} within {secs} s', 'livello di servizio {pct} entro {secs} s'],
  'q.waiting': ['Waiting callers', 'Chiamanti in attesa'],
  'q.nobody': ['Nobody waiting.', 'Nessuno in attesa.'],
  'q.members': ['Members', 'Membri'],
  'q.noMembers': ['No members.', 'Nessun membro.'],
  'q.loggedOut': ['logged out', 'disconnesso'],
  'q.paused': ['paused', 'in pausa'],
  'q.pausedWhy': ['paused ({why})', 'in pausa ({why})'],
  'q.pausedFor': ['paused for', 'in pausa da'],
  'q.loggedInAt': ['logged in at {time}', 'entrato alle {time}'],
  'q.available': ['available', 'disponibile'],
  'q.calls': ['{n} calls', '{n} chiamate'],
  'q.callsTaken': ['calls taken', 'chiamate prese'],
  'q.waitingWord': ['waiting', 'in attesa'],
  'q.answer': ['Answer', 'Rispondi'],
  'q.answerLabel': ['Answer {who} on my phone', 'Rispondi a {who} sul mio telefono'],
  'q.hiddenCaller': ['private number', 'numero riservato'],
  'q.pause': ['Pause', 'Pausa'],
  'q.unpause': ['Unpause', 'Riprendi'],
  'q.login': ['Log in', 'Entra'],
  'q.logout': ['Log out', 'Esci'],
  'q.reason': ['Reason for the pause', 'Motivo della pausa'],
  'q.reasonPh': ['reason (optional)', 'motivo (facoltativo)'],
  'q.take': ['Answer', 'Rispondi'],
  'p.title': ['Parking', 'Parcheggi'],
  'p.none': ['No parked calls.', 'Nessuna chiamata parcheggiata.'],
  'p.free': ['free', 'libero'],
  'p.by': ['parked by {by}', 'parcheggiata da {by}'],
  'p.left': ['returns in {time}', 'torna tra {time}'],
  'p.back': ['returning', 'in ritorno'],
  'p.pickup': ['Pick up', 'Riprendi'],
  'p.pickupLabel': ['Pick up the call parked on {parking}', 'Riprendi la chiamata parcheggiata su {parking}'],

  // Trunks.
  'tr.none': ['No trunks.', 'Nessuna linea.'],
  'tr.name': ['Trunk', 'Linea'],
  'tr.reg': ['Registration', 'Registrazione'],
  'tr.channels': ['Channels in use', 'Canali in uso'],
  'tr.calls': ['Live calls', 'Chiamate in corso'],
  'tr.registered': ['registered', 'registrata'],
  'tr.unregistered': ['not registered', 'non registrata'],
  'tr.noreg': ['none (IP trunk)', 'nessuna (linea IP)'],
  'tr.noCalls': ['none', 'nessuna'],

  // Conferences.
  'cf.none': ['No conferences.', 'Nessuna conferenza.'],
  'cf.title': ['Conference {id}', 'Conferenza {id}'],
  'cf.locked': ['locked', 'bloccata'],
  'cf.open': ['open', 'aperta'],
  'cf.members': ['{n} members', '{n} partecipanti'],
  'cf.owner': ['owner', 'organizzatore'],
  'cf.talking': ['talking', 'parla'],
  'cf.muted': ['muted', 'microfono chiuso'],
  'cf.mute': ['Mute', 'Chiudi microfono'],
  'cf.unmute': ['Unmute', 'Apri microfono'],
  'cf.kick': ['Remove', 'Escludi'],
  'cf.lock': ['Lock', 'Blocca'],
  'cf.unlock': ['Unlock', 'Sblocca'],
  'cf.end': ['End conference', 'Termina conferenza'],
  'cf.kickSure': ['Remove {who} from conference {id}? Their call ends.', 'Escludere {who} dalla conferenza {id}? La sua chiamata termina.'],
  'cf.endSure': ['End conference {id}? All {n} calls in it end.', 'Terminare la conferenza {id}? Tutte le {n} chiamate terminano.'],

  // Phonebook, contact dialog.
  'pb.search': ['Search contacts', 'Cerca contatti'],
  'pb.ph': ['Name, company or number', 'Nome, azienda o numero'],
  'pb.go': ['Search', 'Cerca'],
  'pb.new': ['New contact', 'Nuovo contatto'],
  'pb.failed': ['Search failed: {msg}', 'Ricerca non riuscita: {msg}'],
  'pb.count': ['{count} contacts found{more}', '{count} contatti trovati{more}'],
  'pb.more': [', showing {n}', ', ne mostro {n}'],
  'pb.none': ['No contact matches “{term}”.', 'Nessun contatto corrisponde a «{term}».'],
  'pb.name': ['Name', 'Nome'],
  'pb.company': ['Company', 'Azienda'],
  'pb.numbers': ['Numbers', 'Numeri'],
  'pb.type': ['Type', 'Tipo'],
  'pb.private': ['private', 'privato'],
  'pb.public': ['public', 'pubblico'],
  'pb.work': ['work', 'ufficio'],
  'pb.mobile': ['mobile', 'cellulare'],
  'pb.home': ['home', 'casa'],
  'pb.callNum': ['Call {name} {kind} {num}', 'Chiama {name} {kind} {num}'],
  'pb.edit': ['Edit', 'Modifica'],
  'pb.delete': ['Delete', 'Elimina'],
  'pb.confirmDelete': ['Delete the contact {name}?', 'Eliminare il contatto {name}?'],
  'pb.deleted': ['Contact deleted', 'Contatto eliminato'],
  'pb.saved': ['Contact saved', 'Contatto salvato'],
  'pb.needName': ['A name or a company is required.', 'Serve un nome o un\'azienda.'],
  'c.newTitle': ['New private contact', 'Nuovo contatto privato'],
  'c.editTitle': ['Edit contact', 'Modifica contatto'],
  'c.name': ['Name', 'Nome'],
  'c.company': ['Company', 'Azienda'],
  'c.work': ['Work phone', 'Telefono ufficio'],
  'c.cell': ['Mobile', 'Cellulare'],
  'c.home': ['Home phone', 'Telefono casa'],
  'c.email': ['Email', 'Email'],
  'c.notes': ['Notes', 'Note'],
  'c.cancel': ['Cancel', 'Annulla'],
  'c.save': ['Save', 'Salva'],

  // History.
  'h.from': ['From', 'Da'],
  'h.to': ['To', 'A'],
  'h.dir': ['Direction', 'Direzione'],
  'h.scope': ['Calls', 'Chiamate'],
  'h.mine': ['Mine', 'Mie'],
  'h.everyone': ["Everyone's (switchboard)", 'Di tutti (centralino)'],
  'h.all': ['All', 'Tutte'],
  'h.in': ['Incoming', 'In arrivo'],
  'h.out': ['Outgoing', 'In uscita'],
  'h.internal': ['Internal', 'Interne'],
  'h.number': ['Number', 'Numero'],
  'h.show': ['Show', 'Mostra'],
  'h.csv': ['Download CSV', 'Scarica CSV'],
  'h.prev': ['Previous page', 'Pagina precedente'],
  'h.next': ['Next page', 'Pagina successiva'],
  'h.window': ['Choose a time window', 'Scegli un intervallo di date'],
  'h.failed': ['History failed: {msg}', 'Storico non disponibile: {msg}'],
  'h.caption': ['{count} calls in the window', '{count} chiamate nell\'intervallo'],
  'h.captionWith': ['{count} calls in the window, showing those with {number}', '{count} chiamate nell\'intervallo, mostro quelle con {number}'],
  'h.time': ['Time', 'Ora'],
  'h.result': ['Result', 'Esito'],
  'h.talk': ['Talk', 'Durata'],
  'h.call': ['Call', 'Chiama'],
  'h.callLabel': ['Call {number}', 'Chiama {number}'],

  // Pop-up.
  'pop.title': ['Incoming call on {exten}', 'Chiamata in arrivo su {exten}'],
  'pop.default': ['Incoming call', 'Chiamata in arrivo'],
  'pop.unknown': ['unknown caller', 'chiamante sconosciuto'],
  'pop.queue': ['through queue {queue}', 'dalla coda {queue}'],
  'pop.pb': ['Phonebook: ', 'Rubrica: '],
  'pop.contact': ['contact', 'contatto'],
  'pop.history': ['Recent calls with this number', 'Chiamate recenti con questo numero'],
  'pop.dismiss': ['Dismiss', 'Chiudi'],
};

export const LANGS = {en: 'English', it: 'Italiano'};
const KEY = 'ctibridge.lang';

function pick() {
  let saved = '';
  try { saved = localStorage.getItem(KEY) || ''; } catch { /* storage off */ }
  if (LANGS[saved]) return saved;
  for (const l of navigator.languages || [navigator.language || 'en']) {
    const base = String(l).slice(0, 2).toLowerCase();
    if (LANGS[base]) return base;
  }
  return 'en';
}

export let lang = pick();
const idx = () => (lang === 'it' ? 1 : 0);

// t is the string under key in the current language, with {name}
// placeholders replaced from vars.
export function t(key, vars) {
  const e = S[key];
  let s = e ? e[idx()] : key;
  if (vars) s = s.replace(/\{(\w+)\}/g, (m, k) => (vars[k] ?? m));
  return s;
}

// setLang switches and remembers the language; the caller re-renders.
export function setLang(l) {
  if (!LANGS[l]) return;
  lang = l;
  try { localStorage.setItem(KEY, l); } catch { /* storage off */ }
  document.documentElement.lang = l;
}

// translatePage fills every data-i18n element and attribute of root.
export function translatePage(root = document) {
  document.documentElement.lang = lang;
  document.title = t('app.title');
  for (const e of root.querySelectorAll('[data-i18n]')) e.textContent = t(e.dataset.i18n);
  for (const e of root.querySelectorAll('[data-i18n-attr]')) {
    for (const pair of e.dataset.i18nAttr.split(';')) {
      const [attr, key] = pair.split(':');
      e.setAttribute(attr, t(key));
    }
  }
}
