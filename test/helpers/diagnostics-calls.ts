import { createHash, randomBytes } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { gzipSync } from 'node:zlib';
import { expect } from 'vitest';
import type { HttpResult, RegisteredDevice, TestPlatform } from './platform.js';

/**
 * The calls of the diagnostics tests (DESIGN.md §20): an operator's request, view and download, a charger's
 * state and uploads (whole, in parts, or cut halfway), on the platform `platform()` returns.
 */

/** What the diagnostics chunks hold: the platform stores archives in chunks of this size. */
export const CHUNK = 256 * 1024;

export const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

/** A gzip archive of `bytes` random bytes (which do not compress: the archive is a little larger). */
export function archiveOf(bytes: number): Buffer {
  return gzipSync(randomBytes(bytes), { level: 1 });
}

export interface Download {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

export function diagnosticsCalls(platform: () => TestPlatform) {
  const http = () => platform().http;

  async function request(token: string, d: RegisteredDevice, body?: unknown): Promise<HttpResult> {
    return http().post(`/v1/operator/devices/${d.deviceId}/diagnostics`, {
      token,
      ...(body === undefined ? {} : { json: body }),
    });
  }
  /** Asks for diagnostics and checks the answer; the new request's ids. */
  async function requested(token: string, d: RegisteredDevice, body?: unknown) {
    const res = await request(token, d, body);
    expect(res.status, res.text).toBe(200);
    expect(res.body.data).toEqual({
      diagnostics_id: expect.stringMatching(/^diag_/),
      command_id: expect.stringMatching(/^cmd_/),
      status: 'requested',
    });
    return res.body.data as { diagnostics_id: string; command_id: string };
  }
  const view = (token: string, id: string) => http().get(`/v1/operator/diagnostics/${id}`, { token });
  const state = (d: RegisteredDevice, id: string) =>
    http().get(`/v1/device/diagnostics/${id}`, { token: d.token });

  /** PUTs `archive` from byte `first` to `last` (default: its end), declaring `size` (default: its length). */
  function put(
    d: RegisteredDevice,
    id: string,
    archive: Buffer,
    opts: { first?: number; last?: number; size?: number; range?: string; body?: Buffer } = {},
  ): Promise<HttpResult> {
    const first = opts.first ?? 0;
    const last = opts.last ?? archive.length - 1;
    const size = opts.size ?? archive.length;
    return http().call('PUT', `/v1/device/diagnostics/${id}`, {
      token: d.token,
      raw: opts.body ?? archive.subarray(first, last + 1),
      contentType: 'application/octet-stream',
      headers: { 'content-range': opts.range ?? `bytes ${first}-${last}/${size}` },
    });
  }

  /**
   * Starts a PUT of the archive from `first` to its end, sends bytes until the platform holds `until` bytes
   * (its GET says so), sends a little more, then destroys the socket: a cut mid-body.
   */
  async function putCut(d: RegisteredDevice, id: string, archive: Buffer, first: number, until: number) {
    const tp = platform();
    const req = httpsRequest(`${tp.url}/v1/device/diagnostics/${id}`, {
      method: 'PUT',
      ca: tp.ca,
      agent: false,
      headers: {
        authorization: `Bearer ${d.token}`,
        'content-type': 'application/octet-stream',
        'content-length': String(archive.length - first),
        'content-range': `bytes ${first}-${archive.length - 1}/${archive.length}`,
      },
    });
    req.on('error', () => undefined);
    const write = (b: Buffer) => new Promise<void>((resolve) => req.write(b, () => resolve()));
    let at = first;
    const step = 64 * 1024;
    // Sent until the platform holds `until` bytes, and half a chunk more that it never stores whole.
    for (let polls = 0; ; polls++) {
      const held = (await state(d, id)).body.data.received as number;
      if (held >= until) break;
      expect(polls, 'the platform never held the bytes sent').toBeLessThan(500);
      if (at < until) {
        await write(archive.subarray(at, Math.min(at + step, until)));
        at = Math.min(at + step, until);
      } else await new Promise((r) => setTimeout(r, 10));
    }
    await write(archive.subarray(at, at + CHUNK / 2));
    req.destroy();
  }

  /** Downloads the archive, its bytes read whole. */
  function content(token: string, id: string, headers: Record<string, string> = {}, on = platform()) {
    return new Promise<Download>((resolve, reject) => {
      const req = httpsRequest(`${on.url}/v1/operator/diagnostics/${id}/content`, {
        ca: on.ca,
        agent: false,
        headers: { authorization: `Bearer ${token}`, ...headers },
      });
      req.on('response', async (res) => {
        const chunks: Buffer[] = [];
        for await (const c of res) chunks.push(c as Buffer);
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) });
      });
      req.on('error', reject).end();
    });
  }

  return { request, requested, view, state, put, putCut, content };
}
