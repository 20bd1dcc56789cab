import type { IncomingMessage } from 'node:http';
import type net from 'node:net';
import { Duplex } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROXY_V2_SIGNATURE } from '../../platform/http/proxy-protocol.js';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { exchange, sleep, tcpConnect, tlsConnect, watch } from '../helpers/raw-connections.js';

/**
 * `serve --proxy-protocol` (DESIGN.md §18): each connection starts with a PROXY protocol v2 header, read before
 * TLS; the requests on it carry the client's address. Headers are built by hand here (HAProxy itself:
 * proxy-protocol-haproxy.test.ts).
 */
const FIRST_REQUEST_MS = 2_000;

let tp: TestPlatform;
/** `request.ip` as Fastify computes it (the request socket's remoteAddress), per request, in order. */
const seen: string[] = [];
beforeAll(async () => {
  tp = await startTestPlatform({
    proxyProtocol: true,
    logLevel: 'debug',
    connections: { firstRequestMs: FIRST_REQUEST_MS },
  });
  tp.platform.app.server.on('request', (req: IncomingMessage) => seen.push(String(req.socket.remoteAddress)));
});
afterAll(async () => {
  await tp?.stop();
});

function v2(command: 'proxy' | 'local', family: number, addresses: Buffer): Buffer {
  const len = Buffer.alloc(2);
  len.writeUInt16BE(addresses.length);
  return Buffer.concat([
    PROXY_V2_SIGNATURE,
    Buffer.from([command === 'proxy' ? 0x21 : 0x20, family]),
    len,
    addresses,
  ]);
}
function ipv4Header(client: string, port: number): Buffer {
  const body = Buffer.alloc(12);
  Buffer.from(client.split('.').map(Number)).copy(body, 0);
  Buffer.from([127, 0, 0, 1]).copy(body, 4);
  body.writeUInt16BE(port, 8);
  body.writeUInt16BE(8443, 10);
  return v2('proxy', 0x11, body);
}
const IPV6_HEADER = v2(
  'proxy',
  0x21,
  // 2001:db8::1 port 51000 -> ::1 port 8443
  Buffer.from(
    ['20010db8000000000000000000000001', '00000000000000000000000000000001', 'c738', '20fb'].join(''),
    'hex',
  ),
);

const GET_HEALTHZ = 'GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n';

/** Sends `header` (in pieces, if asked) on a new TCP connection, then TLS and one request; the answer's status. */
async function throughHeader(header: Buffer, pieces = 1): Promise<number> {
  const raw = await tcpConnect(tp.port);
  const size = Math.ceil(header.length / pieces);
  for (let i = 0; i < header.length; i += size) {
    raw.write(header.subarray(i, i + size));
    if (pieces > 1) await sleep(30);
  }
  const socket = await tlsConnect(tp.port, tp.ca, { socket: raw });
  try {
    return (await exchange(socket, GET_HEALTHZ)).status;
  } finally {
    socket.destroy();
  }
}

/** The client's bytes through a stream that puts `header` in front of TLS's first write: one segment for both. */
function coalescing(raw: net.Socket, header: Buffer): Duplex {
  let first = true;
  const duplex = new Duplex({
    write(chunk: Buffer, _enc, done) {
      raw.write(first ? Buffer.concat([header, chunk]) : chunk, done);
      first = false;
    },
    read() {},
    final(done) {
      raw.end(done);
    },
  });
  raw.on('data', (c: Buffer) => duplex.push(c));
  raw.on('end', () => duplex.push(null));
  raw.on('error', (err) => duplex.destroy(err));
  return duplex;
}

describe('a PROXY v2 header names the client', () => {
  it('IPv4: request.ip is the client address in the header, and a debug log line says so', async () => {
    seen.length = 0;
    expect(await throughHeader(ipv4Header('203.0.113.7', 51000))).toBe(200);
    expect(seen).toEqual(['203.0.113.7']);
    const line = tp.logs.map((l) => JSON.parse(l)).find((l) => l.client === '203.0.113.7');
    expect(line).toMatchObject({ port: 51000, msg: 'PROXY protocol: connection from client' });
  });

  it('IPv6: request.ip is the IPv6 client address', async () => {
    seen.length = 0;
    expect(await throughHeader(IPV6_HEADER)).toBe(200);
    expect(seen).toEqual(['2001:db8::1']);
  });

  it('every request on a kept-alive connection carries it', async () => {
    seen.length = 0;
    const raw = await tcpConnect(tp.port);
    raw.write(ipv4Header('198.51.100.20', 40000));
    const socket = await tlsConnect(tp.port, tp.ca, { socket: raw });
    for (let i = 0; i < 3; i++) expect((await exchange(socket, GET_HEALTHZ)).status).toBe(200);
    socket.destroy();
    expect(seen).toEqual(['198.51.100.20', '198.51.100.20', '198.51.100.20']);
  });

  it('a header that arrives in pieces is read whole', async () => {
    seen.length = 0;
    expect(await throughHeader(ipv4Header('192.0.2.44', 1234), 5)).toBe(200);
    expect(seen).toEqual(['192.0.2.44']);
  });

  it('a header and the ClientHello in one segment: TLS gets the bytes after the header', async () => {
    seen.length = 0;
    const raw = await tcpConnect(tp.port);
    const socket = await tlsConnect(tp.port, tp.ca, { socket: coalescing(raw, ipv4Header('192.0.2.45', 1)) });
    expect((await exchange(socket, GET_HEALTHZ)).status).toBe(200);
    socket.destroy();
    expect(seen).toEqual(['192.0.2.45']);
  });

  it('LOCAL (a balancer health check): the socket address stays', async () => {
    seen.length = 0;
    expect(await throughHeader(v2('local', 0x00, Buffer.alloc(0)))).toBe(200);
    expect(seen).toEqual(['127.0.0.1']);
  });
});

describe('without a valid PROXY v2 header the connection is closed', () => {
  it.each([
    ['the v1 text form', Buffer.from('PROXY TCP4 203.0.113.7 127.0.0.1 51000 8443\r\n')],
    ['a wrong signature', Buffer.concat([Buffer.from('\r\n\r\n\0\r\nQUIT!'), Buffer.alloc(4)])],
    ['version 1 in the binary form', Buffer.concat([PROXY_V2_SIGNATURE, Buffer.from([0x11, 0x11, 0, 0])])],
    ['a UNIX address', v2('proxy', 0x31, Buffer.alloc(216))],
    ['PROXY with no address (UNSPEC)', v2('proxy', 0x00, Buffer.alloc(0))],
  ])('%s', async (_name, header) => {
    const raw = await tcpConnect(tp.port);
    const watched = watch(raw);
    raw.write(header);
    const { afterMs, received } = await watched.closed;
    expect(received).toBe('');
    // At once, not at the first-request limit.
    expect(afterMs).toBeLessThan(FIRST_REQUEST_MS / 2);
  });

  it('TLS straight away (no header) fails the handshake', async () => {
    await expect(tlsConnect(tp.port, tp.ca)).rejects.toThrow();
  });

  it('a connection that never sends the header is closed at the first-request limit', async () => {
    const raw = await tcpConnect(tp.port);
    const { afterMs } = await watch(raw).closed;
    expect(afterMs).toBeGreaterThanOrEqual(FIRST_REQUEST_MS - 100);
    expect(afterMs).toBeLessThan(FIRST_REQUEST_MS + 2_500);
  });

  it('a header cut short is closed at the first-request limit', async () => {
    const raw = await tcpConnect(tp.port);
    const watched = watch(raw);
    raw.write(ipv4Header('203.0.113.7', 1).subarray(0, 20));
    const { afterMs } = await watched.closed;
    expect(afterMs).toBeGreaterThanOrEqual(FIRST_REQUEST_MS - 100);
  });

  it('the platform still serves after all that', async () => {
    expect(await throughHeader(ipv4Header('203.0.113.8', 2))).toBe(200);
  });
});
