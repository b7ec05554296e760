// A NethCTI client as phone-island opens it (src/components/Socket.tsx):
// the official socket.io-client, the websocket transport only, login on
// connect, a ping with an ack once logged in. Every event it receives is
// printed as one JSON line {"event", "data"}; it ends when its standard
// input closes. Usage: node client.js URL PATH USER TOKEN UATYPE
const { io } = require('socket.io-client')

const [url, path, user, token, uaType] = process.argv.slice(2)
const out = (event, data) => process.stdout.write(JSON.stringify({ event, data }) + '\n')

const socket = io(url, { path, transports: ['websocket'], upgrade: false, reconnection: false })
socket.on('connect', () => {
  out('connect')
  socket.emit('login', { accessKeyId: user, token, uaType })
})
socket.on('authe_ok', (data) => {
  out('authe_ok', data)
  socket.volatile.emit('ping', () => out('pingAck'))
})
socket.on('takeOver', () => {
  out('takeOver')
  socket.emit('takeOverAck')
})
socket.onAny((event, data) => {
  if (event !== 'authe_ok' && event !== 'takeOver') out(event, data)
})
socket.on('disconnect', (reason) => out('disconnect', reason))
socket.on('connect_error', (err) => out('connect_error', String(err)))

process.stdin.on('end', () => {
  socket.close()
  process.exit(0)
})
process.stdin.resume()
