import type { ArtifactManifest } from '../../shared/artifact-manifest.js';
import type { Artifact } from '../../shared/artifacts.js';
import type { UpdateStatus } from '../../shared/updates.js';
import { compact, optionalNumber } from './form-values.js';

/** The Firmware and update pages' rules (DESIGN.md §19), pure so that table tests cover them. */

export type VersionField = 'agent_version' | 'firmware_version';

export interface VersionCount {
  /** Undefined: the charger did not say (an older agent, or no firmware version given). */
  version: string | undefined;
  count: number;
}

/** How many chargers run each version: most first, then by version; the unknown ones last. */
export function versionCounts(
  devices: Iterable<Partial<Record<VersionField, string | undefined>>>,
  field: VersionField,
): VersionCount[] {
  const counts = new Map<string | undefined, number>();
  for (const d of devices) {
    const v = d[field] || undefined;
    counts.set(v, (counts.get(v) ?? 0) + 1);
  }
  return [...counts.entries()]
    .map(([version, count]) => ({ version, count }))
    .sort((a, b) => {
      if ((a.version === undefined) !== (b.version === undefined)) return a.version === undefined ? 1 : -1;
      return (
        b.count - a.count || (a.version ?? '').localeCompare(b.version ?? '', undefined, { numeric: true })
      );
    });
}

/** The value in the Firmware page's address for chargers without a version. */
export const UNKNOWN_VERSION = 'unknown';

/** The chargers an address such as `#/firmware?agent_version=1.2.0` asks for, or undefined when it asks none. */
export function versionFilter(query: URLSearchParams): { field: VersionField; version: string } | undefined {
  for (const field of ['agent_version', 'firmware_version'] as const) {
    const version = query.get(field);
    if (version !== null && version !== '') return { field, version };
  }
  return undefined;
}

export function matchesVersion(
  device: Partial<Record<VersionField, string | undefined>>,
  filter: { field: VersionField; version: string },
): boolean {
  const v = device[filter.field] || undefined;
  return filter.version === UNKNOWN_VERSION ? v === undefined : v === filter.version;
}

/** What a `.sig` file says: always the signature and what it covers, the release's names when it has them. */
export interface SignedFile {
  sha256: string;
  size: number;
  signature: string;
  kind?: ArtifactManifest['kind'];
  version?: string;
  target?: string;
}

export type SigFile = { ok: true; signed: SignedFile } | { ok: false; error: string };

/**
 * A `.sig` file: `npm run build:agent -- --sign-key` writes `{kind, version, target, sha256, size, signature}`,
 * `charger-platform artifacts sign --json` prints `{sha256, size, signature}` (the kind, version and target are
 * then typed). Only its shape is checked here; the API and the chargers decide the rest.
 */
export function parseSigFile(text: string): SigFile {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return { ok: false, error: 'The signature file is not JSON' };
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw))
    return { ok: false, error: 'The signature file is not a JSON object' };
  const m = raw as Record<string, unknown>;
  const missing = ['sha256', 'signature'].filter((k) => typeof m[k] !== 'string');
  if (typeof m.size !== 'number') missing.push('size');
  if (missing.length > 0) return { ok: false, error: `The signature file lacks ${missing.join(', ')}` };
  if (m.kind !== undefined && m.kind !== 'agent' && m.kind !== 'firmware')
    return { ok: false, error: `The signature file's kind ${String(m.kind)} is neither agent nor firmware` };
  const textOrNone = (v: unknown) => (typeof v === 'string' ? v : undefined);
  return {
    ok: true,
    signed: compact({
      sha256: m.sha256 as string,
      size: m.size as number,
      signature: m.signature as string,
      kind: m.kind as SignedFile['kind'],
      version: textOrNone(m.version),
      target: textOrNone(m.target),
    }) as SignedFile,
  };
}

/** The upload form's release fields. */
export interface UploadRelease {
  kind: string;
  version: string;
  target: string;
  signature: string;
}

/**
 * The release fields once a `.sig` file is read: a build's manifest names the release (a missing target: any);
 * `artifacts sign --json` does not, and what was typed stays beside its signature.
 */
export function releaseFromSig(signed: SignedFile, typed: UploadRelease): UploadRelease {
  if (signed.kind === undefined || signed.version === undefined)
    return { ...typed, signature: signed.signature };
  return {
    kind: signed.kind,
    version: signed.version,
    target: signed.target ?? '',
    signature: signed.signature,
  };
}

/** What the platform measured of an upload that differs from what was signed (the charger would refuse it). */
export function uploadMismatches(
  signed: Pick<ArtifactManifest, 'sha256' | 'size'>,
  measured: Pick<Artifact, 'sha256' | 'size'>,
): string[] {
  const out: string[] = [];
  if (signed.size !== measured.size) out.push(`size: signed ${signed.size}, uploaded ${measured.size}`);
  if (signed.sha256.toLowerCase() !== measured.sha256)
    out.push(`sha256: signed ${shortSha(signed.sha256)}, uploaded ${shortSha(measured.sha256)}`);
  return out;
}

export function shortSha(sha256: string): string {
  return sha256.length > 12 ? `${sha256.slice(0, 12)}…` : sha256;
}

/** 1536 → "1.5 KiB". */
export function bytes(n: number): string {
  if (n < 1024) return `${n} B`;
  const units = ['KiB', 'MiB', 'GiB'];
  let v = n / 1024;
  let unit = 0;
  while (v >= 1024 && unit < units.length - 1) {
    v /= 1024;
    unit++;
  }
  return `${v.toFixed(v >= 100 ? 0 : 1)} ${units[unit]}`;
}

/** The buttons an update's status allows (docs/api.md: pause only running, resume only paused). */
export function updateActions(status: UpdateStatus): { pause: boolean; resume: boolean; cancel: boolean } {
  return {
    pause: status === 'running',
    resume: status === 'paused',
    cancel: status === 'running' || status === 'paused',
  };
}

/** A charger in these states still reports, even after its update was cancelled (docs/api.md). */
const MOVING_STATES = ['queued', 'downloading', 'install_scheduled', 'installing', 'installed'];

/**
 * While an update can still move, its page reads it again: running or paused, or cancelled with chargers that
 * had already taken the update and go on reporting.
 */
export function isUpdateLive(status: UpdateStatus, progress: Record<string, number>): boolean {
  if (status === 'running' || status === 'paused') return true;
  return MOVING_STATES.some((s) => (progress[s] ?? 0) > 0);
}

/** The order the page lists a progress's states in: the way a charger goes, failures last. */
const STATE_ORDER = [
  'pending',
  'queued',
  'downloading',
  'install_scheduled',
  'installing',
  'installed',
  'succeeded',
  'skipped',
  'failed',
  'rolled_back',
  'cancelled',
];

/** `{failed: 1, pending: 2}` → `[['pending', 2], ['failed', 1]]`, zeros left out, unknown states at the end. */
export function progressEntries(progress: Record<string, number>): Array<[string, number]> {
  const rank = (s: string) => {
    const i = STATE_ORDER.indexOf(s);
    return i === -1 ? STATE_ORDER.length : i;
  };
  return Object.entries(progress)
    .filter(([, n]) => n > 0)
    .sort(([a], [b]) => rank(a) - rank(b) || a.localeCompare(b));
}

export interface UpdateFormFields {
  artifact_id: string;
  /** `all`, or `site` with `site_ids`. */
  target: string;
  site_ids: string[];
  install: string;
  window_start: string;
  window_end: string;
  batch_size: string;
  max_failure_percent: string;
  health_seconds: string;
}

/**
 * The update form as `POST /v1/operator/updates`'s body. Empty fields are left out so that the API's defaults
 * apply; anything typed goes as typed, so the API's validation answers in its own words.
 */
export function updateRequestBody(f: UpdateFormFields): Record<string, unknown> {
  const all = f.target === 'all';
  const window = f.window_start || f.window_end ? { start: f.window_start, end: f.window_end } : undefined;
  const rollout = compact({
    batch_size: optionalNumber(f.batch_size),
    max_failure_percent: optionalNumber(f.max_failure_percent),
    health_seconds: optionalNumber(f.health_seconds),
  });
  return compact({
    artifact_id: f.artifact_id,
    target_type: all ? 'all' : 'site',
    // An empty list goes as sent, so that the API names `target_ids` itself.
    target_ids: all ? undefined : f.site_ids,
    install: f.install,
    window,
    rollout: Object.keys(rollout).length > 0 ? rollout : undefined,
  });
}

/**
 * The update form's field that an API validation error names (`details.field`: `rollout.batch_size`,
 * `window.start`, `target_ids.0`), so the message shows beside it; undefined when the form has no such field.
 */
export function updateFormFieldOf(
  details: Record<string, unknown> | undefined,
): keyof UpdateFormFields | undefined {
  const field = details?.field;
  if (typeof field !== 'string') return undefined;
  const [head, sub] = field.split('.');
  if (
    head === 'rollout' &&
    (sub === 'batch_size' || sub === 'max_failure_percent' || sub === 'health_seconds')
  )
    return sub;
  if (head === 'window') return sub === 'end' ? 'window_end' : 'window_start';
  if (head === 'target_ids' || head === 'target_type') return 'target';
  if (head === 'artifact_id' || head === 'install') return head;
  return undefined;
}
