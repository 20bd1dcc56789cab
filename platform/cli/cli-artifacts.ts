import { createHash, createPrivateKey, type KeyObject, sign } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import type { Command } from 'commander';
import {
  ARTIFACT_MAX_BYTES,
  ARTIFACT_SIGNATURE,
  type ArtifactManifest,
  ArtifactUploadQuery,
  artifactSigningText,
} from '../../shared/index.js';
import { createArtifactService } from '../services/artifact-service.js';
import type { WithStore } from './cli-enrolments.js';
import { databaseOption } from './cli-options.js';

/**
 * `charger-platform artifacts sign|add` (DESIGN.md §19): the OEM signs a release's manifest with its Ed25519 key
 * (on its own machine: the platform never holds that key), and an administrator adds the file and its signature
 * to an operator, through the same service as the upload endpoint.
 */

class ArtifactError extends Error {}

/** `--kind`, `--version`, `--target` checked as the upload's query is. */
function releaseOf(o: { kind: string; version: string; target?: string }) {
  const parsed = ArtifactUploadQuery.safeParse({
    kind: o.kind,
    version: o.version,
    ...(o.target !== undefined ? { target: o.target } : {}),
  });
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new ArtifactError(`--${String(issue.path[0] ?? 'kind')} ${issue.message}`);
  }
  return parsed.data;
}

/** The file's size, refused when unreadable, empty or too large for the platform. */
async function fileSize(path: string): Promise<number> {
  let size: number;
  try {
    const s = await stat(path);
    if (!s.isFile()) throw new ArtifactError(`--file ${path} is not a file`);
    size = s.size;
  } catch (err) {
    if (err instanceof ArtifactError) throw err;
    throw new ArtifactError(
      `cannot read --file ${path}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`,
    );
  }
  if (size === 0) throw new ArtifactError(`--file ${path} is empty`);
  if (size > ARTIFACT_MAX_BYTES)
    throw new ArtifactError(`--file ${path} is larger than ${ARTIFACT_MAX_BYTES} bytes`);
  return size;
}

async function sha256Of(path: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const piece of createReadStream(path)) hash.update(piece as Buffer);
  return hash.digest('hex');
}

async function ed25519Key(path: string): Promise<KeyObject> {
  let key: KeyObject;
  try {
    key = createPrivateKey(await readFile(path));
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new ArtifactError(
      code?.startsWith('E') && !code.startsWith('ERR_')
        ? `cannot read --key ${path}: ${code}`
        : `--key ${path} is not a private key in PEM`,
    );
  }
  if (key.asymmetricKeyType !== 'ed25519')
    throw new ArtifactError(`--key ${path} is a ${key.asymmetricKeyType} key; an Ed25519 key is needed`);
  return key;
}

/** The file and its release, as both commands take them. */
function releaseOptions(command: Command): Command {
  return command
    .requiredOption('--file <file>', 'the artifact file')
    .requiredOption('--kind <kind>', 'agent or firmware')
    .requiredOption('--version <version>')
    .option(
      '--target <target>',
      'a platform (linux-arm64) or hardware model; none: every charger of its kind',
    );
}

export function addArtifactsCommand(program: Command, withStore: WithStore): void {
  const artifacts = program
    .command('artifacts')
    .description('Update artifacts: sign a release (OEM side) and add it to an operator');
  releaseOptions(artifacts.command('sign'))
    .description("sign a file's manifest with the OEM's Ed25519 key: prints {sha256, size, signature}")
    .requiredOption('--key <file>', 'the Ed25519 private key (PEM)')
    .option('--json', 'machine-readable output')
    .action(async (o) => {
      const release = releaseOf(o);
      const key = await ed25519Key(o.key);
      const size = await fileSize(o.file);
      const manifest: ArtifactManifest = {
        kind: release.kind,
        version: release.version,
        target: release.target ?? '',
        sha256: await sha256Of(o.file),
        size,
      };
      const signature = sign(null, Buffer.from(artifactSigningText(manifest)), key).toString('base64');
      const out = { sha256: manifest.sha256, size, signature };
      process.stdout.write(
        o.json ? `${JSON.stringify(out)}\n` : `sha256 ${out.sha256}\nsize ${size}\nsignature ${signature}\n`,
      );
    });
  releaseOptions(artifacts.command('add'))
    .description(
      "add a signed file to an operator's artifacts (the signature is stored, the charger verifies it)",
    )
    .requiredOption('--data-dir <dir>')
    .addOption(databaseOption())
    .requiredOption('--operator <id>', 'the operator the artifact belongs to')
    .requiredOption('--signature <base64>', "the manifest's signature, as `artifacts sign` printed it")
    .option('--json', 'machine-readable output')
    .action(async (o) => {
      const release = releaseOf(o);
      if (!ARTIFACT_SIGNATURE.test(o.signature))
        throw new ArtifactError('--signature must be an Ed25519 signature in base64 (88 characters)');
      await fileSize(o.file);
      const artifact = await withStore(o, async (store) => {
        if (!(await store.getOperator(o.operator))) throw new ArtifactError(`no operator ${o.operator}`);
        const service = createArtifactService({ store, now: Date.now });
        return service.upload([o.operator], release, o.signature, createReadStream(o.file));
      });
      process.stdout.write(
        o.json
          ? `${JSON.stringify(artifact)}\n`
          : `added artifact ${artifact.artifact_id} (${artifact.kind} ${artifact.version}` +
              `${artifact.target ? ` for ${artifact.target}` : ''}, ${artifact.size} bytes, sha256 ${artifact.sha256})\n`,
      );
    });
}
