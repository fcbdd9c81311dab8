import { createServer, connect, type Server, type Socket } from 'node:net'

/**
 * A TCP proxy on 127.0.0.1 to a server of the machine (NATS, Redis, a replica), to play its
 * outages: `stop()` cuts every connection and refuses new ones until `start()`; `freeze()` keeps
 * the connections open and forwards nothing until `thaw()` (a server that stopped answering);
 * `freezeOpen()` does so to the connections open now only; `holdNew()` accepts new connections and
 * never forwards them (a server that takes connections and never answers one), until `forwardNew()`
 * lets later ones through (the held ones stay silent).
 */
export interface TcpProxy {
  port: number
  /** `url` with its host and port replaced by the proxy's. */
  url: string
  stop(): Promise<void>
  start(): Promise<void>
  freeze(): void
  /** Holds the connections open now (nothing forwarded either way), new ones forwarded: one connection gone silent while the server is fine. */
  freezeOpen(): void
  thaw(): void
  holdNew(): void
  forwardNew(): void
  close(): Promise<void>
}

export async function tcpProxy(targetUrl: string, defaultPort: number): Promise<TcpProxy> {
  const target = new URL(targetUrl)
  const targetPort = Number(target.port || defaultPort)
  const pairs = new Set<[Socket, Socket]>()
  let server: Server | null = null
  let port = 0
  let frozen = false
  let holdingNew = false
  const held = new Set<Socket>()
  const forward = ([client, upstream]: [Socket, Socket]) => {
    client.pipe(upstream)
    upstream.pipe(client)
  }
  const hold = ([client, upstream]: [Socket, Socket]) => {
    client.unpipe(upstream)
    upstream.unpipe(client)
    client.pause()
    upstream.pause()
  }
  const listen = async (): Promise<void> => {
    server = createServer((client) => {
      if (holdingNew) {
        held.add(client)
        client.on('error', () => client.destroy())
        client.on('close', () => held.delete(client))
        client.pause()
        return
      }
      const pair: [Socket, Socket] = [client, connect(targetPort, target.hostname)]
      pairs.add(pair)
      for (const s of pair) {
        s.on('error', () => { pair[0].destroy(); pair[1].destroy() })
        s.on('close', () => { pairs.delete(pair); pair[0].destroy(); pair[1].destroy() })
      }
      if (frozen) hold(pair)
      else forward(pair)
    })
    await new Promise<void>((resolve) => server!.listen(port, '127.0.0.1', resolve))
    port = (server!.address() as { port: number }).port
  }
  const stop = async (): Promise<void> => {
    if (!server) return
    const closing = new Promise((resolve) => server!.close(resolve))
    for (const [client, upstream] of pairs) {
      client.destroy()
      upstream.destroy()
    }
    for (const client of held) client.destroy()
    await closing
    server = null
  }
  await listen()
  const url = new URL(targetUrl)
  url.hostname = '127.0.0.1'
  url.port = String(port)
  return {
    port,
    url: url.href,
    stop,
    start: listen,
    freeze() {
      frozen = true
      for (const pair of pairs) hold(pair)
    },
    freezeOpen() {
      for (const pair of pairs) hold(pair)
    },
    thaw() {
      frozen = false
      for (const pair of pairs) {
        forward(pair)
        pair[0].resume()
        pair[1].resume()
      }
    },
    holdNew() {
      holdingNew = true
    },
    forwardNew() {
      holdingNew = false
    },
    close: stop,
  }
}
