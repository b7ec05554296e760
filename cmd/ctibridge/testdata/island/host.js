// The host page's script, bundled by the test (esbuild) with the npm
// packages @nethesis/phone-island (its built dist/), react and react-dom.
// It logs in as the page's query asks (?user&pass&login=jwt|legacy), as
// the NethVoice CTI web app (JWT) or NethLink (nonce) would, mounts the
// island with the config token it decodes (base64 of
// "host:user:token:sipExten:sipSecret:sipHost:sipPort"; no SIP extension:
// the island runs without WebRTC), and records in window.__events every
// phone-island-* event the island dispatches on window.
import React from 'react'
import { createRoot } from 'react-dom/client'
import { PhoneIsland } from '@nethesis/phone-island'
import '@nethesis/phone-island/dist/index.css'

const events = (window.__events = [])
const dispatch = window.dispatchEvent.bind(window)
window.dispatchEvent = (e) => {
  if (e.type.startsWith('phone-island-')) events.push({ name: e.type, detail: e.detail, t: Date.now() })
  return dispatch(e)
}
window.__seen = (name) => events.filter((e) => e.name === name)

async function jwtLogin(user, pass) {
  const r = await fetch('/api/login', {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ username: user, password: pass }),
  })
  if (!r.ok) throw new Error('POST /api/login: ' + r.status)
  return (await r.json()).token
}

async function legacyLogin(user, pass) {
  const r = await fetch('/webrest/authentication/login', {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ username: user, password: pass }),
  })
  const auth = r.headers.get('WWW-Authenticate') || ''
  if (r.status !== 401 || !auth.startsWith('Digest ')) throw new Error('legacy login: ' + r.status + ' ' + auth)
  const nonce = auth.slice('Digest '.length)
  const enc = new TextEncoder()
  const key = await crypto.subtle.importKey('raw', enc.encode(pass), { name: 'HMAC', hash: 'SHA-1' }, false, ['sign'])
  const mac = await crypto.subtle.sign('HMAC', key, enc.encode(user + ':' + pass + ':' + nonce))
  return [...new Uint8Array(mac)].map((b) => b.toString(16).padStart(2, '0')).join('')
}

async function main() {
  const q = new URLSearchParams(location.search)
  const user = q.get('user'), pass = q.get('pass')
  try {
    const token = q.get('login') === 'legacy' ? await legacyLogin(user, pass) : await jwtLogin(user, pass)
    const config = btoa([location.hostname, user, token, '', '', '', ''].join(':'))
    window.__login = { user, token }
    createRoot(document.getElementById('island')).render(
      React.createElement(PhoneIsland, { dataConfig: config, uaType: 'desktop', showAlways: true }),
    )
  } catch (err) {
    window.__loginError = String(err)
    console.error(err)
  }
}
main()
