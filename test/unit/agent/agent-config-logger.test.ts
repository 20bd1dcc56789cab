import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Writable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError, resolveRunConfig } from '../../../agent/agent-config.js';
import { createAgentLogger } from '../../../agent/logger.js';
import { createRotatingFile } from '../../../agent/rotating-file.js';
import { tempDir } from '../../helpers/agent.js';

describe('run configuration', () => {
  let tmp: ReturnType<typeof tempDir>;
  beforeEach(() => {
    tmp = tempDir();
  });
  afterEach(() => tmp.remove());

  it('takes the config file (either spelling), resolves its paths against it, and lets flags win', () => {
    const file = path.join(tmp.dir, 'agent.json');
    writeFileSync(
      file,
      JSON.stringify({
        'data-dir': 'state',
        platformUrl: 'https://platform.example:8443/',
        ca: 'ca.pem',
        sn: 'FILE-SN',
        hal: './my-hal.js',
        connectors: 2,
        v2g: true,
        'hal-options': { seed: 1 },
        'log-level': 'debug',
      }),
    );
    const config = resolveRunConfig({ config: file, sn: 'FLAG-SN' }, '/somewhere/else');
    expect(config).toMatchObject({
      dataDir: path.join(tmp.dir, 'state'),
      platformUrl: 'https://platform.example:8443',
      ca: path.join(tmp.dir, 'ca.pem'),
      sn: 'FLAG-SN',
      hal: path.join(tmp.dir, 'my-hal.js'),
      connectors: 2,
      v2g: true,
      halOptions: { seed: 1 },
      logLevel: 'debug',
    });
    expect(resolveRunConfig({ config: file, hal: 'simulated', connectors: '4' }).hal).toBe('simulated');
    expect(resolveRunConfig({ config: file, connectors: '4' }).connectors).toBe(4);
  });

  it('says clearly what is missing or wrong', () => {
    const file = path.join(tmp.dir, 'bad.json');
    expect(() => resolveRunConfig({ platformUrl: 'https://p', sn: 'S' })).toThrow(/--data-dir is required/);
    expect(() => resolveRunConfig({ dataDir: 'd', sn: 'S' })).toThrow(/--platform-url is required/);
    expect(() => resolveRunConfig({ dataDir: 'd', platformUrl: 'http://p', sn: 'S' })).toThrow(
      /must be https/,
    );
    expect(() => resolveRunConfig({ dataDir: 'd', platformUrl: 'https://p' })).toThrow(/--sn is required/);
    expect(() =>
      resolveRunConfig({ dataDir: 'd', platformUrl: 'https://p', sn: 'S', connectors: '0' }),
    ).toThrow(/1-16/);
    writeFileSync(file, JSON.stringify({ 'platform-ur1': 'https://p' }));
    expect(() => resolveRunConfig({ config: file })).toThrow(/platformUr1: unknown key/);
    writeFileSync(file, '{');
    expect(() => resolveRunConfig({ config: file })).toThrow(ConfigError);
    expect(() => resolveRunConfig({ config: path.join(tmp.dir, 'nope.json') })).toThrow(/ENOENT/);
  });

  it('takes a client certificate and key (attested registration) from flags or the file, only as a pair', () => {
    const base = { dataDir: 'd', platformUrl: 'https://p', sn: 'S' };
    const file = path.join(tmp.dir, 'agent.json');
    writeFileSync(
      file,
      JSON.stringify({ ...base, 'client-cert': 'certs/sn.pem', clientKey: 'certs/sn.key' }),
    );
    expect(resolveRunConfig({ config: file }, '/elsewhere')).toMatchObject({
      clientCert: path.join(tmp.dir, 'certs/sn.pem'),
      clientKey: path.join(tmp.dir, 'certs/sn.key'),
    });
    // Flags win, relative to the working directory.
    expect(resolveRunConfig({ config: file, clientCert: 'mine.pem' }, '/work')).toMatchObject({
      clientCert: '/work/mine.pem',
      clientKey: path.join(tmp.dir, 'certs/sn.key'),
    });
    expect(resolveRunConfig(base)).not.toHaveProperty('clientCert');
    expect(() => resolveRunConfig({ ...base, clientCert: 'a.pem' })).toThrow(
      /--client-cert and --client-key go together/,
    );
    expect(() => resolveRunConfig({ ...base, clientKey: 'a.key' })).toThrow(/go together/);
  });
});

describe('logs', () => {
  let tmp: ReturnType<typeof tempDir>;
  beforeEach(() => {
    tmp = tempDir();
  });
  afterEach(() => tmp.remove());

  it('rotates the log file by size and keeps a bounded number of files', () => {
    const file = path.join(tmp.dir, 'logs', 'agent.log');
    const log = createRotatingFile(file, { maxBytes: 100, keep: 2 });
    for (let i = 0; i < 20; i++) log.write(`${`line ${i}`.padEnd(39, '.')}\n`); // 40 bytes each
    log.close();
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(existsSync(`${file}.1`)).toBe(true);
    expect(existsSync(`${file}.2`)).toBe(true);
    expect(existsSync(`${file}.3`)).toBe(false);
    expect(readFileSync(file, 'utf8')).toMatch(/^line 18/);
    for (const f of [file, `${file}.1`, `${file}.2`]) expect(statSync(f).size).toBeLessThanOrEqual(100);
  });

  it('writes JSON to the file and stderr, and never a secret or a token', async () => {
    let captured = '';
    const stderr = new Writable({
      write(chunk, _enc, done) {
        captured += chunk.toString();
        done();
      },
    });
    const { logger, close } = await createAgentLogger({ dataDir: tmp.dir, stderr, level: 'info' });
    logger.info(
      { device_secret: 'hunter2', access_token: 'tok123', nested: { secret: 'x' }, device_id: 'dev_1' },
      'hello',
    );
    close();
    const fileText = readFileSync(path.join(tmp.dir, 'logs', 'agent.log'), 'utf8');
    for (const text of [captured, fileText]) {
      const line = JSON.parse(text.trim()) as Record<string, unknown>;
      expect(line).toMatchObject({
        msg: 'hello',
        device_id: 'dev_1',
        device_secret: '[redacted]',
        access_token: '[redacted]',
      });
      expect(text).not.toMatch(/hunter2|tok123/);
    }
  });
});
