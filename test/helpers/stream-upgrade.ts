import WebSocket from 'ws';
import type { TestPlatform } from './platform.js';

/**
 * The HTTP answer to a telemetry-stream upgrade (`/v1/operator/stream`): 101 when it was accepted (the socket is
 * closed at once), else the refusal's status and JSON body.
 */
export function streamUpgrade(
  tp: Pick<TestPlatform, 'port' | 'ca'>,
  headers: Record<string, string>,
  query = '',
  // biome-ignore lint/suspicious/noExplicitAny: refusal bodies are inspected field by field
): Promise<{ status: number; body?: any }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`wss://127.0.0.1:${tp.port}/v1/operator/stream${query}`, { ca: tp.ca, headers });
    ws.on('error', () => undefined);
    ws.on('open', () => {
      ws.close();
      resolve({ status: 101 });
    });
    ws.on('unexpected-response', (req, res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        text += chunk;
      });
      res.on('end', () => {
        req.destroy();
        try {
          resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) });
        } catch {
          reject(new Error(`refusal is not JSON: ${res.statusCode} ${text}`));
        }
      });
    });
  });
}
