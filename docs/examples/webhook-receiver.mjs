// A webhook receiver that verifies every delivery with the Standard Webhooks reference library
// (`npm install standardwebhooks`) and treats `webhook-id` as its idempotency key.
//
//   WEBHOOK_SECRET=whsec_... PORT=8787 node webhook-receiver.mjs
//
// Plain HTTP for a local try-out against the sandbox (which allows http and loopback receivers); in production
// the platform delivers only to public https URLs.
import { createServer } from 'node:http';
import { Webhook } from 'standardwebhooks';

const secrets = (process.env.WEBHOOK_SECRET ?? '').split(',').filter(Boolean);
if (secrets.length === 0) throw new Error('set WEBHOOK_SECRET (comma-separated during a rotation)');
const verifiers = secrets.map((s) => new Webhook(s));
const seen = new Set(); // keep this in your database in real life

createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks).toString('utf8');
    let event;
    for (const v of verifiers) {
      try {
        event = v.verify(body, req.headers); // checks the signature and the 5-minute timestamp window
        break;
      } catch {}
    }
    if (!event) {
      res.writeHead(400).end();
      return;
    }
    const id = req.headers['webhook-id'];
    if (!seen.has(id)) {
      seen.add(id);
      console.log(id, event.type, JSON.stringify(event.data));
    }
    // Answer fast (2xx within 15 s); do slow work after answering.
    res.writeHead(204).end();
  });
}).listen(Number(process.env.PORT ?? 8787), '127.0.0.1');
