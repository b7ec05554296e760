// The one place where a failed request becomes words for the screen: the
// server's codes and statuses (docs/rest.md, "Acting on calls") map to
// plain sentences in the user's language; the server's own message, meant
// for developers, never reaches the screen as is.

import {t} from './i18n.js';

// What Asterisk says when it refuses, as the bridge relays it ("the PBX
// refused <Action>: <message>"), in plain words.
const PBX_SAYS = [
  [/invalid\/unknown command|unknown action|no such command/i, 'err.unsupported'],
  [/no channel by that name found in conference|no channel name provided/i, 'err.confMemberGone'],
  [/no conference by that name|no active conferences|no conference name/i, 'err.confGone'],
  [/no such channel|channel not found|channel .* does not exist|not found/i, 'err.noSuchChannel'],
  [/originate failed|transfer failed|atxfer failed|redirect failed/i, 'err.callFailed'],
  [/already there/i, 'err.alreadyMember'],
  [/not there|member not dynamic/i, 'err.notMember'],
  [/no such queue/i, 'err.noQueue'],
];

// plainError is a sentence for an ApiError (or any error) from api.js.
export function plainError(e) {
  const status = e?.status ?? -1;
  const code = e?.code || '';
  const msg = e?.serverMessage || '';
  switch (true) {
    case status === 0: return t('err.network');
    case status === 400 && /endpointId is required|owns 0 endpoints/.test(msg): return t('err.noPhone');
    case status === 400: return t('err.badInput');
    case status === 401: return t('err.session');
    case status === 403: return t('err.mayNot');
    case status === 404 && /^no such route/.test(msg): return t('err.unavailable');
    case status === 404: return t('err.notFound');
    case status === 409 && /no cellphone/.test(msg): return t('err.noMobile');
    case status === 409 && /no voicemail box/.test(msg): return t('err.noVoicemail');
    case status === 409 && /no ringing call/.test(msg): return t('err.noRinging');
    case status === 409: return t('err.gone');
    case status === 413: return t('err.tooBig');
    case status === 429: return t('err.slow');
    case status === 502 && code === 'pbx_connection_lost': return t('err.down');
    case status === 502: return pbxRefused(msg);
    case status === 503: return t('err.down');
    case status === 504: return t('err.timeout');
    case status >= 500: return t('err.server', {status});
  }
  return t('err.server', {status: e?.message || '?'});
}

function pbxRefused(msg) {
  // "the PBX refused Originate: Channel not found": keep what Asterisk said.
  const said = msg.replace(/^the PBX refused [A-Za-z]+:\s*/, '').trim();
  for (const [re, key] of PBX_SAYS) if (re.test(said)) return t('err.refused', {why: t(key)});
  // Asterisk's own words never reach the screen (they are English and
  // meant for developers): the console keeps them.
  if (said && said !== msg) console.info('PBX refusal:', said);
  return t('err.refusedUnknown');
}
