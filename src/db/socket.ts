import { connect, type Socket } from 'node:net'

/** What postgres.js passes to a `socket` factory: its parsed connection options. */
type SocketOptions = { host?: string[]; port?: number[]; path?: string }

/**
 * A postgres.js connection with Nagle's algorithm off. postgres.js opens plain `net.Socket`s, where Nagle
 * holds a small write back until the previous one is acknowledged, and the server delays that ACK by
 * 40 ms: every COPY (its data, then a 5-byte CopyDone) and every query written behind another stalls that
 * long. Measured: five small COPYs in one transaction take 450 ms with Nagle, 12 ms without.
 *
 * The socket is returned while it connects (Node queues what postgres.js writes until then), so
 * postgres.js's connect timeout, error handling and reconnects apply as with its own sockets; several
 * hosts are tried in turn, one per connection attempt, as postgres.js does.
 */
function createSocketFactory() {
  let next = 0
  return (options: SocketOptions): Socket => {
    if (options.path) return connect(options.path)
    const hosts = options.host ?? ['localhost']
    const ports = options.port ?? [5432]
    const index = next++ % hosts.length
    const host = hosts[index]!
    const port = ports[index] ?? ports[0]!
    // postgres.js names the host and port of a socket in its connection errors.
    return Object.assign(connect({ host, port, noDelay: true }), { host, port })
  }
}

/**
 * postgres.js options (spread into `postgres(url, {...})`) that open every connection without Nagle's
 * delay. `socket` is a postgres.js option its type declarations leave out.
 */
export function noDelayConnections(): Record<'socket', (options: SocketOptions) => Socket> {
  return { socket: createSocketFactory() }
}
